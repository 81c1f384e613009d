"""Each preflight check against moto (the real boto3 client on a fake account), or, where moto does not
implement the API (capacity reservations, EKS versions), against botocore's Stubber, which rejects
responses that do not fit the service model."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.stub import Stubber

from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from components.findings import Finding
from scripts.preflight.checks import (
    CHECKS,
    QUOTAS,
    check_efa,
    check_kubernetes_version,
    check_offerings,
    check_quotas,
    reservation_result,
    vcpu_demand,
    vcpu_quota,
)
from scripts.preflight.runner import AwsUnavailable, failed, run_checks
from tests.config.helpers import raw_config
from tests.preflight.conftest import REGION

pytestmark = pytest.mark.slow  # moto's AWS in every test: `make test-fast` leaves it out


def only(results: Iterable[Finding], subject: str) -> Finding:
    [match] = [r for r in results if subject in r.resource]
    return match


def test_prod_passes_on_a_prepared_account(prod_account: dict, session: boto3.Session, prod: ClusterConfig) -> None:
    results = run_checks(session, prod, CHECKS)
    assert not failed(results), [r for r in results if r.severity == "error"]
    passed = {r.rule for r in results if r.severity == "info"}
    assert passed == {"instance-offerings", "efa", "vcpu-quota", "s3-buckets"}
    assert only(results, "Running On-Demand P instances").message.startswith("quota 3456 vCPUs; maxNodes needs 3456")
    # moto has no DescribeClusterVersions: that check says so instead of crashing
    [version] = [r for r in results if r.rule == "kubernetes-version"]
    assert version.severity == "warning" and "DescribeClusterVersions" in version.message


def test_zero_p_quota_fails_naming_the_increase(prod_account: dict, session: boto3.Session,
                                                prod: ClusterConfig) -> None:
    prod_account["L-417A185B"] = 0
    result = only(check_quotas(session, prod), "L-417A185B")
    assert result.severity == "error"
    # The Kubernetes pool's p5 nodes draw on the same quota as the partitions'.
    assert result.message == ("quota 0 vCPUs; maxNodes needs 3456 "
                             "(partition gpu-h100 1536, partition gpu-a100 1536, pool ml-h100 384)")
    assert "request-service-quota-increase --service-code ec2 --quota-code L-417A185B --desired-value 3456" \
           " --region us-west-2" in result.fix
    assert only(check_quotas(session, prod), "L-2C3B7624").severity == "info"


def test_spot_partitions_count_against_the_spot_quota() -> None:
    dev = parse_cluster_config(raw_config("dev"))[0]
    assert vcpu_demand(dev) == {QUOTAS["G and VT", True]: {"partition gpu": 2 * 48}}


def test_quota_without_applied_value_falls_back_to_the_aws_default() -> None:
    client = boto3.client("service-quotas", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(client) as stub:
        stub.add_client_error("get_service_quota", "NoSuchResourceException")
        stub.add_response("get_aws_default_service_quota", {"Quota": {"QuotaCode": "L-417A185B", "Value": 0.0}},
                          {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
        assert vcpu_quota(client, "L-417A185B") == 0


@pytest.mark.parametrize(("bucket_region", "detail"), [
    (None, "bucket does not exist"),
    ("eu-west-1", "bucket is in eu-west-1, the stack in us-west-2"),
])
def test_fsx_bucket_missing_or_elsewhere_fails(quotas: dict, session: boto3.Session, prod: ClusterConfig,
                                              bucket_region: str | None, detail: str) -> None:
    if bucket_region:
        boto3.client("s3", region_name=bucket_region).create_bucket(
            Bucket="ml-data", CreateBucketConfiguration={"LocationConstraint": bucket_region})
    [result] = [r for r in run_checks(session, prod, CHECKS) if r.rule == "s3-buckets"]
    assert (result.resource, result.severity, result.message) == ("s3://ml-data", "error", detail)
    assert "us-west-2" in result.fix


def test_trn1_not_offered_in_the_efa_zone_fails_naming_zones(aws: None, session: boto3.Session,
                                                             prod: ClusterConfig) -> None:
    """moto's own offerings: trn1.32xlarge in us-west-2b and 2d only, trn1n in 2d only, p4de not in 2d."""
    results = list(check_offerings(session, prod))
    trn1 = only(results, "trainium: trn1.32xlarge")
    assert trn1.severity == "error"
    assert trn1.message == "not offered in us-west-2a (network.efaAvailabilityZone); offered in us-west-2b, us-west-2d"
    assert trn1.fix == "no zone offers every EFA partition's types: drop trn1.32xlarge from the partition"
    assert only(results, "gpu-h100: p5.48xlarge").severity == "info"

    raw = raw_config("prod")  # without trn1n and p4de, us-west-2b and 2d offer every EFA type
    raw["partitions"]["trainium"]["instanceTypes"] = ["trn1.32xlarge"]
    raw["partitions"]["gpu-a100"]["instanceTypes"] = ["p4d.24xlarge"]
    fewer = list(check_offerings(session, parse_cluster_config(raw)[0]))
    fix = only(fewer, "partition trainium: trn1.32xlarge").fix
    assert fix.startswith("set network.efaAvailabilityZone to one of us-west-2b, us-west-2d ")


def test_existing_vpc_zones_come_from_its_subnets(aws: None, session: boto3.Session) -> None:
    ec2 = session.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.9.{i}.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]
               for i, zone in enumerate(("us-west-2c", "us-west-2d"))]
    raw = raw_config("dev")
    raw["network"] = {"vpcId": vpc, "privateSubnetIds": subnets, "deployer": {"via": "vpc", "cidrs": ["10.9.0.0/24"]}}
    g5 = only(check_offerings(session, parse_cluster_config(raw)[0]), "gpu: g5.12xlarge")
    assert (g5.severity, g5.message) == ("warning", "not offered in us-west-2d; launches only in us-west-2c")


def test_efa_passes_for_p5_and_fails_without_efa(aws: None, session: boto3.Session) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-a100"]["instanceTypes"] = ["g5.xlarge"]  # structure only: validation would refuse
    results = list(check_efa(session, ClusterConfig.model_validate(raw)))
    p5 = only(results, "partition gpu-h100: p5.48xlarge")
    assert (p5.severity, p5.message) == ("info", "32 EFA interfaces, as the catalog expects")
    assert only(results, "pool ml-h100: p5.48xlarge").severity == "info"  # the Kubernetes pool's EFA is checked too
    g5 = only(results, "g5.xlarge")
    assert (g5.severity, g5.message) == ("error", "g5.xlarge does not support EFA")
    assert "efa: false" in g5.fix
    assert only(results, "trn1n.32xlarge").severity == "info"


def _reservation(**changes: object) -> dict:
    return {"CapacityReservationId": "cr-0123456789abcdef0", "InstanceType": "p5.48xlarge",
            "AvailabilityZone": "us-west-2a", "State": "active", "TotalInstanceCount": 8,
            "AvailableInstanceCount": 6, **changes}


@pytest.mark.parametrize(("found", "severity", "fix"), [
    ([_reservation()], "info", ""),
    ([_reservation(AvailabilityZone="us-west-2b")], "error", "the partition launches only in us-west-2a"),
    ([_reservation(InstanceType="p4d.24xlarge")], "error", "list a reservation for p5.48xlarge"),
    ([_reservation(State="scheduled")], "warning", "nodes launch into it once it is active"),
    ([_reservation(State="expired")], "error", "list an active reservation"),
    ([], "error", "check the ID"),
])
def test_capacity_reservation(prod: ClusterConfig, found: list, severity: str, fix: str) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": found},
                          {"CapacityReservationIds": ["cr-0123456789abcdef0"]})
        result = reservation_result(ec2, "cr-0123456789abcdef0", "partition gpu-h100", prod.partitions["gpu-h100"],
                                    ["us-west-2a"], REGION)
    assert (result.severity, result.resource) == (severity, "partition gpu-h100: cr-0123456789abcdef0")
    assert result.fix.startswith(fix)
    if found:
        cr = found[0]
        assert result.message == f"{cr['InstanceType']} in {cr['AvailabilityZone']}: 6 of 8 available, {cr['State']}"


def test_missing_capacity_reservation_error_fails(prod: ClusterConfig) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_capacity_reservations", "InvalidCapacityReservationId.NotFound")
        result = reservation_result(ec2, "cr-0123456789abcdef0", "partition gpu-h100", prod.partitions["gpu-h100"],
                                    ["us-west-2a"], REGION)
    assert (result.severity, result.message) == ("error", "no such capacity reservation in us-west-2")


@pytest.mark.parametrize(("version", "severity", "text"), [
    ("1.33", "info", "standard support until 2026-07-29"),
    ("1.30", "warning", "extended support, at an extra hourly charge until 2026-07-23"),
    ("1.29", "error", "EKS in us-west-2 does not offer 1.29"),
])
def test_kubernetes_version(monkeypatch: pytest.MonkeyPatch, version: str, severity: str, text: str) -> None:
    session = boto3.Session(region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    eks = session.client("eks")
    monkeypatch.setattr(session, "client", lambda name: eks)
    # The config validators accept only versions with pinned add-ons; the check asks EKS about any version.
    config = parse_cluster_config(raw_config("prod"))[0].model_copy(update={"kubernetes_version": version})
    versions = [
        {"clusterVersion": "1.30", "versionStatus": "EXTENDED_SUPPORT",
         "endOfExtendedSupportDate": dt.datetime(2026, 7, 23, tzinfo=dt.UTC)},
        {"clusterVersion": "1.33", "versionStatus": "STANDARD_SUPPORT",
         "endOfStandardSupportDate": dt.datetime(2026, 7, 29, tzinfo=dt.UTC)},
        {"clusterVersion": "1.32", "versionStatus": "STANDARD_SUPPORT"},
    ]
    with Stubber(eks) as stub:
        stub.add_response("describe_cluster_versions", {"clusterVersions": versions}, {})
        [result] = check_kubernetes_version(session, config)
    assert (result.severity, result.message) == (severity, text)
    if severity != "info":
        assert result.fix.endswith("1.32, 1.33")


def test_an_api_error_becomes_a_warning_and_keeps_earlier_answers(session: boto3.Session,
                                                                  prod: ClusterConfig) -> None:
    def refused(session: boto3.Session, config: ClusterConfig) -> Iterable[Finding]:
        yield Finding(rule="quota", resource="first", severity="info", message="answered")
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetServiceQuota")

    results = run_checks(session, prod, {"quota": refused})
    assert [r.severity for r in results] == ["info", "warning"]
    assert "allow GetServiceQuota" in results[1].fix


def test_an_unreachable_endpoint_stops_the_run(session: boto3.Session, prod: ClusterConfig) -> None:
    def unreachable(session: boto3.Session, config: ClusterConfig) -> Iterable[Finding]:
        raise EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com")

    with pytest.raises(AwsUnavailable, match=r"ec2\.us-west-2\.amazonaws\.com"):
        run_checks(session, prod, {"offerings": unreachable})


# --- Capacity Blocks -----------------------------------------------------------------------------------------

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


def _block(**changes: object) -> dict:
    """A Capacity Block as DescribeCapacityReservations returns it: ReservationType capacity-block, with StartDate
    and EndDate (botocore ec2 2016-11-15 shape CapacityReservation)."""
    return _reservation(**{"ReservationType": "capacity-block", "StartDate": NOW - dt.timedelta(days=1),
                            "EndDate": NOW + dt.timedelta(days=13), **changes})


def _block_partition(prod: ClusterConfig) -> ClusterConfig:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="capacity-block", capacityReservationIds=["cr-0123456789abcdef0"])
    return parse_cluster_config(raw)[0]


@pytest.mark.parametrize(("found", "severity", "words"), [
    (_block(), "info", "block 2026-12-01 12:00 UTC to 2026-12-15 12:00 UTC"),
    (_block(ReservationType="default"), "error", "not a Capacity Block"),
    (_reservation(), "error", "not a Capacity Block"),  # no ReservationType: an older ODCR
    (_block(InstanceType="p5e.48xlarge"), "error", "p5e.48xlarge in us-west-2a"),
    (_block(AvailabilityZone="us-west-2b"), "error", "us-west-2b"),
    (_block(EndDate=NOW - dt.timedelta(minutes=1), State="expired"), "error", "the block has ended"),
    (_block(State="cancelled"), "error", "cancelled"),
    (_block(State="scheduled", StartDate=NOW + dt.timedelta(days=1)), "warning", "scheduled, block 2026-12-03"),
    # 7 days of maxTime, 6 days and 23h20m left until Karpenter takes the nodes (40 minutes before EndDate)
    (_block(EndDate=NOW + dt.timedelta(days=7)), "warning",
     "jobs can start for 167.3 h more, below maxTime 7-00:00:00"),
])
def test_capacity_block(prod: ClusterConfig, found: dict, severity: str, words: str) -> None:
    config = _block_partition(prod)
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [found]},
                          {"CapacityReservationIds": ["cr-0123456789abcdef0"]})
        result = reservation_result(ec2, "cr-0123456789abcdef0", "partition gpu-h100", config.partitions["gpu-h100"],
                                    ["us-west-2a"], REGION, NOW)
    assert (result.severity, result.rule) == (severity, "capacity-reservations"), result
    assert words in result.message, result
    assert bool(result.fix) == (severity != "info")


def test_a_capacity_block_listed_as_an_odcr_is_a_warning(prod: ClusterConfig) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="reserved", capacityReservationIds=["cr-0123456789abcdef0"])
    config = parse_cluster_config(raw)[0]
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [_block()]},
                          {"CapacityReservationIds": ["cr-0123456789abcdef0"]})
        result = reservation_result(ec2, "cr-0123456789abcdef0", "partition gpu-h100", config.partitions["gpu-h100"],
                                    ["us-west-2a"], REGION, NOW)
    assert result.severity == "warning" and "capacityType: capacity-block" in result.fix


def test_a_stack_with_a_capacity_block_partition_preflights(prod_account: dict, session: boto3.Session,
                                                            prod: ClusterConfig) -> None:
    """The whole preflight on moto. moto 5.2.5 has no DescribeCapacityReservations: that one call is answered
    before it is sent (botocore's before-call event), everything else by moto."""
    config = _block_partition(prod)
    end = dt.datetime.now(dt.UTC) + dt.timedelta(days=10)

    def describe(params: dict, **_: object) -> tuple[AWSResponse, dict]:
        assert params["body"]["CapacityReservationId.1"] == "cr-0123456789abcdef0"  # the serialized request
        return AWSResponse(params["url"], 200, {}, None), {"CapacityReservations": [_block(EndDate=end)]}

    session.events.register("before-call.ec2.DescribeCapacityReservations", describe)
    results = run_checks(session, config, CHECKS)
    assert not failed(results), [r for r in results if r.severity == "error"]
    block = only(results, "cr-0123456789abcdef0")
    assert (block.severity, block.rule) == ("info", "capacity-reservations")
    assert block.message.endswith(f"to {end:%Y-%m-%d %H:%M} UTC")
