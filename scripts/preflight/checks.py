"""The preflight checks, each `(session, config) -> Iterable[Finding]`, all read-only AWS calls.

Zone names (us-west-2a) map to different physical zones in each account, so every zone answer here is
the caller's account's own view (DescribeInstanceTypeOfferings answers in the caller's names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import boto3
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from components import catalog
from components.config.cluster import ClusterConfig, Network, Partition
from components.config.k8s_pools import NodeGroup
from components.findings import Finding
from jobs.render import slurm_time_seconds
from scripts.preflight.runner import Check
from slurm.agent.capacity.reservations import LEAD


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _names(items: Iterable[str]) -> str:
    return ", ".join(items) or "none"


# --- zones -----------------------------------------------------------------------------------------------

def vpc_zones(ec2: BaseClient, network: Network) -> list[str]:
    """The zones of the cluster's private subnets: configured for a new VPC, asked of EC2 for an existing one."""
    if network.creates_vpc:
        return list(network.availability_zones)
    subnets = ec2.describe_subnets(SubnetIds=list(network.private_subnet_ids))["Subnets"]
    return sorted({s["AvailabilityZone"] for s in subnets})


def node_groups(config: ClusterConfig) -> dict[str, NodeGroup]:
    """Every group of Karpenter nodes, as preflight names it: the partitions, then the Kubernetes pools (their
    nodes draw on the same quotas, offerings and reservations)."""
    return {**{f"partition {n}": p for n, p in config.partitions.items()},
            **{f"pool {n}": p for n, p in config.kubernetes_pools.items()}}


def efa_node_groups(config: ClusterConfig) -> dict[str, NodeGroup]:
    return {subject: group for subject, group in node_groups(config).items() if group.efa}


def offered_zones(ec2: BaseClient, instance_types: Iterable[str]) -> dict[str, set[str]]:
    """Instance type -> the zones of the region that offer it."""
    offered: dict[str, set[str]] = {t: set() for t in instance_types}
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": sorted(offered)}])
    for page in pages:
        for offering in page["InstanceTypeOfferings"]:
            offered[offering["InstanceType"]].add(offering["Location"])
    return offered


def check_offerings(session: boto3.Session, config: ClusterConfig) -> Iterator[Finding]:
    """Each partition's types are offered where it launches: the EFA zone, or the VPC's zones."""
    ec2 = session.client("ec2")
    vpc = vpc_zones(ec2, config.network)
    efa_zone = config.network.efa_availability_zone
    # subject -> (instance types, zones it may launch in, whether every one of those zones is required)
    targets = {subject: (p.instance_types, [efa_zone] if p.efa else vpc, p.efa)
               for subject, p in node_groups(config).items()}
    targets["systemNodes"] = (config.system_nodes.instance_types, vpc, False)
    offered = offered_zones(ec2, {t for types, _, _ in targets.values() for t in types})
    efa_types = [offered[t] for p in efa_node_groups(config).values() for t in p.instance_types]
    efa_ready = sorted(set.intersection(*efa_types)) if efa_types else []
    for subject, (types, zones, single_zone) in targets.items():
        for instance_type in types:
            have = offered[instance_type]
            where = _names(sorted(have))
            inside = [z for z in zones if z in have]
            missing = [z for z in zones if z not in have]
            name = f"{subject}: {instance_type}"
            if not missing:
                yield Finding(rule="instance-offerings", resource=name, severity="info",
                              message=f"offered in {_names(zones)}")
            elif not have:
                yield Finding(rule="instance-offerings", resource=name, severity="error",
                              message=f"not offered in any zone of {config.region}",
                              fix="choose an instance type that this region offers, or another region")
            elif single_zone:
                move = (f"set network.efaAvailabilityZone to one of"
                        f" {_names(efa_ready)} (each offers every EFA type), or "
                        if efa_ready else "no zone offers every EFA partition's types: ")
                yield Finding(rule="instance-offerings", resource=name, severity="error",
                              message=f"not offered in {efa_zone} (network.efaAvailabilityZone); offered in {where}",
                              fix=f"{move}drop {instance_type} from the partition")
            elif inside:
                yield Finding(rule="instance-offerings", resource=name, severity="warning",
                              message=f"not offered in {_names(missing)}; launches only in {_names(inside)}",
                              fix=f"fine if those zones have the capacity; it is offered in {where}")
            else:
                yield Finding(rule="instance-offerings", resource=name, severity="error",
                              message=f"not offered in {_names(zones)}",
                              fix=f"add a zone (subnet) offering it to the network: {where}")


# --- EFA -------------------------------------------------------------------------------------------------

def check_efa(session: boto3.Session, config: ClusterConfig) -> Iterator[Finding]:
    """EFA partitions' and pools' types support EFA with at least the interfaces the catalog has nodes request."""
    types = sorted({t for p in efa_node_groups(config).values() for t in p.instance_types})
    if not types:
        return
    pages = session.client("ec2").get_paginator("describe_instance_types").paginate(InstanceTypes=types)
    network = {i["InstanceType"]: i["NetworkInfo"] for page in pages for i in page["InstanceTypes"]}
    for group_name, partition in efa_node_groups(config).items():
        for instance_type in partition.instance_types:
            info = network[instance_type]
            actual = info["EfaInfo"]["MaximumEfaInterfaces"] if info.get("EfaSupported") else 0
            expected = catalog.lookup(instance_type).efa_interfaces
            subject = f"{group_name}: {instance_type}"
            if actual == 0:
                yield Finding(rule="efa", resource=subject, severity="error",
                              message=f"{instance_type} does not support EFA",
                              fix="use EFA instance types (p4d, p5, trn1, ...) or set efa: false")
            elif actual < expected:
                yield Finding(rule="efa", resource=subject, severity="error",
                              message=f"{actual} EFA interfaces; nodes would request {expected} "
                              f"(components/catalog.py)",
                              fix=f"set efa_interfaces of {instance_type} in components/catalog.py to {actual}")
            elif actual > expected:
                yield Finding(rule="efa", resource=subject, severity="warning",
                              message=f"{actual} EFA interfaces; nodes request only {expected} "
                              f"(components/catalog.py)",
                              fix=f"set efa_interfaces of {instance_type} in components/catalog.py to {actual}")
            else:
                yield Finding(rule="efa", resource=subject, severity="info",
                              message=f"{actual} EFA interfaces, as the catalog expects")


# --- vCPU quotas -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quota:
    code: str
    name: str


# EC2 vCPU quotas of the accelerated families (Service Quotas, service code ec2). On-demand capacity
# reservations count against the on-demand quota, so `reserved` partitions use it too.
FAMILY_GROUPS = {"p": "P", "g": "G and VT", "vt": "G and VT", "trn": "Trn"}
QUOTAS: dict[tuple[str, bool], Quota] = {  # (group, spot) -> quota
    ("P", False): Quota("L-417A185B", "Running On-Demand P instances"),
    ("P", True): Quota("L-7212CCBC", "All P Spot Instance Requests"),
    ("G and VT", False): Quota("L-DB2E81BA", "Running On-Demand G and VT instances"),
    ("G and VT", True): Quota("L-3819A6DF", "All G and VT Spot Instance Requests"),
    ("Trn", False): Quota("L-2C3B7624", "Running On-Demand Trn instances"),
    ("Trn", True): Quota("L-6B0D517C", "All Trn Spot Instance Requests"),
}


def quota_for(instance_type: str, partition: NodeGroup) -> Quota | None:
    """The vCPU quota an instance type draws on; None for families outside P, G/VT and Trn."""
    group = FAMILY_GROUPS.get(re.sub(r"\d.*", "", instance_type))  # "trn1n.32xlarge" -> "trn"
    return QUOTAS[group, partition.capacity_type == "spot"] if group else None


def vcpu_demand(config: ClusterConfig) -> dict[Quota, dict[str, int]]:
    """Quota -> {partition or pool: vCPUs at maxNodes of its largest type}, as the NodePool's cpu limit counts."""
    demand: dict[Quota, dict[str, int]] = {}
    for name, partition in node_groups(config).items():
        for instance_type in partition.instance_types:
            quota = quota_for(instance_type, partition)
            if quota:
                uses = demand.setdefault(quota, {})
                uses[name] = max(uses.get(name, 0), partition.max_nodes * catalog.lookup(instance_type).vcpu)
    return demand


def vcpu_quota(quotas_client: BaseClient, code: str) -> float:
    """The account's applied value; the AWS default where Service Quotas holds no applied value."""
    try:
        return quotas_client.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
    except ClientError as exc:
        if _error_code(exc) != "NoSuchResourceException":
            raise
    return quotas_client.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]


def check_quotas(session: boto3.Session, config: ClusterConfig) -> Iterator[Finding]:
    """The account's vCPU quota of each family group covers every partition at maxNodes."""
    client = session.client("service-quotas")
    for quota, uses in vcpu_demand(config).items():
        need = sum(uses.values())
        have = vcpu_quota(client, quota.code)
        detail = f"quota {have:g} vCPUs; maxNodes needs {need} ({', '.join(f'{p} {v}' for p, v in uses.items())})"
        subject = f"{quota.name} ({quota.code})"
        if have >= need:
            yield Finding(rule="vcpu-quota", resource=subject, severity="info",
                          message=f"{detail}; other instances share it")
        else:
            yield Finding(rule="vcpu-quota", resource=subject, severity="error", message=detail,
                          fix=f"aws service-quotas request-service-quota-increase --service-code ec2 "
                          f"--quota-code {quota.code} --desired-value {need} --region {config.region} "
                          f"(or lower maxNodes)")


# --- capacity reservations -------------------------------------------------------------------------------

PENDING_STATES = {"pending", "scheduled", "assessing", "delayed", "payment-pending"}
# ReservationType of a Capacity Block (botocore ec2 2016-11-15 service-2.json, shape CapacityReservation:
# ReservationType enum default | capacity-block; StartDate, EndDate timestamps).
CAPACITY_BLOCK = "capacity-block"


def check_reservations(session: boto3.Session, config: ClusterConfig) -> Iterator[Finding]:
    """Listed capacity reservations exist, are active, and match the partition's (or pool's) types and zones;
    Capacity Blocks are blocks, and have not ended."""
    reserving = {n: p for n, p in node_groups(config).items() if p.capacity_reservation_ids}
    if not reserving:
        return
    ec2 = session.client("ec2")
    vpc = vpc_zones(ec2, config.network)
    now = datetime.now(UTC)
    for name, partition in reserving.items():
        zones = [config.network.efa_availability_zone] if partition.efa else vpc
        for reservation_id in partition.capacity_reservation_ids:
            yield reservation_result(ec2, reservation_id, name, partition, zones, config.region, now)


def reservation_result(ec2: BaseClient, reservation_id: str, name: str, partition: NodeGroup, zones: list[str],
                       region: str, now: datetime | None = None) -> Finding:
    subject = f"{name}: {reservation_id}"
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    except ClientError as exc:
        if _error_code(exc) != "InvalidCapacityReservationId.NotFound":
            raise
        found = []
    if not found:
        return Finding(rule="capacity-reservations", resource=subject, severity="error",
                       message=f"no such capacity reservation in {region}",
                       fix="check the ID, and that the reservation is in this region or shared with this account")
    cr = found[0]
    state, zone, instance_type = cr["State"], cr["AvailabilityZone"], cr["InstanceType"]
    block = cr.get("ReservationType") == CAPACITY_BLOCK
    detail = (f"{instance_type} in {zone}: {cr['AvailableInstanceCount']} of {cr['TotalInstanceCount']} "
              f"available, {state}")
    if block:
        detail += f", block {_utc(cr.get('StartDate'))} to {_utc(cr.get('EndDate'))}"
    if partition.capacity_type == "capacity-block" and not block:
        return Finding(rule="capacity-reservations", resource=subject, severity="error",
                       message=f"{detail}; an On-Demand Capacity Reservation, not a Capacity Block",
                       fix="list the Capacity Block's reservation ID (cr-...), or set capacityType: reserved")
    if instance_type not in partition.instance_types:
        return Finding(rule="capacity-reservations", resource=subject, severity="error", message=detail,
                       fix=f"list a reservation for {_names(partition.instance_types)}, or add {instance_type}")
    if zone not in zones:
        return Finding(rule="capacity-reservations", resource=subject, severity="error", message=detail,
                       fix=f"the partition launches only in {_names(zones)}: use a reservation there")
    if block:
        ended = block_end_result(subject, detail, partition, cr.get("StartDate"), cr.get("EndDate"),
                                 now or datetime.now(UTC))
        if ended is not None:
            return ended
    if state in PENDING_STATES:
        return Finding(rule="capacity-reservations", resource=subject, severity="warning", message=detail,
                       fix="nodes launch into it once it is active")
    if state != "active":
        return Finding(rule="capacity-reservations", resource=subject, severity="error", message=detail,
                       fix="list an active reservation")
    if block and partition.capacity_type != "capacity-block":
        return Finding(rule="capacity-reservations", resource=subject, severity="warning",
                       message=f"{detail}; a Capacity Block",
                       fix="set capacityType: capacity-block, so that Slurm starts no job that would run past the "
                       "block's end")
    return Finding(rule="capacity-reservations", resource=subject, severity="info", message=detail)


def block_end_result(subject: str, detail: str, partition: NodeGroup, start: datetime | None, end: datetime | None,
                     now: datetime) -> Finding | None:
    """A fail once the block has ended; a warning when it ends within the partition's maxTime (a job of maxTime
    started now, or at the block's start, could not finish: Slurm holds back jobs that would run into the block's
    last LEAD minutes, when Karpenter takes the nodes: slurm/agent/capacity/reservations.py); None otherwise."""
    if end is None:
        return None
    if end <= now:
        return Finding(rule="capacity-reservations", resource=subject, severity="error",
                       message=f"{detail}; the block has ended",
                       fix="list a Capacity Block that has not ended (aws ec2 describe-capacity-block-offerings)")
    limit = slurm_time_seconds(partition.max_time) if isinstance(partition, Partition) else None
    usable = end - LEAD - max(now, start or now)
    if limit is not None and usable < timedelta(seconds=limit):
        return Finding(rule="capacity-reservations", resource=subject, severity="warning",
                       message=f"{detail}; jobs can start for {_hours(usable)} more, below maxTime "
                       f"{partition.max_time}",
                       fix="fine for shorter jobs; extend the block or add the next one before long jobs are held "
                       "back")
    return None


def _utc(moment: datetime | None) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if moment else "unknown"


def _hours(span: timedelta) -> str:
    return f"{max(span.total_seconds(), 0) / 3600:.1f} h"


# --- S3 --------------------------------------------------------------------------------------------------

def check_buckets(session: boto3.Session, config: ClusterConfig) -> Iterator[Finding]:
    """The FSx repositories' buckets exist in the stack's region (FSx links buckets of its own region)."""
    s3 = session.client("s3")
    for bucket in sorted({urlparse(r.s3).netloc for r in config.storage.fsx.repositories}):
        yield bucket_result(s3, bucket, config.region)


def bucket_result(s3: BaseClient, bucket: str, region: str) -> Finding:
    subject = f"s3://{bucket}"
    try:
        bucket_region = s3.head_bucket(Bucket=bucket)["BucketRegion"]
    except ClientError as exc:
        code = _error_code(exc)
        if code in ("404", "NoSuchBucket"):
            return Finding(rule="s3-buckets", resource=subject, severity="error", message="bucket does not exist",
                           fix=f"aws s3 mb {subject} --region {region}, or fix storage.fsx.repositories[].s3")
        if code in ("403", "AccessDenied"):
            return Finding(rule="s3-buckets", resource=subject, severity="warning",
                           message="bucket exists but these credentials cannot read it",
                           fix="FSx links it with the deployer's permissions: allow s3:ListBucket on it")
        raise
    if bucket_region != region:
        return Finding(rule="s3-buckets", resource=subject, severity="error",
                       message=f"bucket is in {bucket_region}, the stack in {region}",
                       fix=f"use a bucket in {region} (S3 replication can copy the data there)")
    return Finding(rule="s3-buckets", resource=subject, severity="info", message=f"exists in {region}")


# --- Kubernetes version ----------------------------------------------------------------------------------

def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _until(day: datetime | None) -> str:
    return f" until {day:%Y-%m-%d}" if day else ""


def check_kubernetes_version(session: boto3.Session, config: ClusterConfig) -> Iterator[Finding]:
    """EKS in the region offers kubernetesVersion, preferably in standard support."""
    pages = session.client("eks").get_paginator("describe_cluster_versions").paginate()
    versions = {v["clusterVersion"]: v for page in pages for v in page["clusterVersions"]}
    standard = sorted((k for k, v in versions.items() if v.get("versionStatus") == "STANDARD_SUPPORT"),
                      key=_version_key)
    wanted = config.kubernetes_version
    found = versions.get(wanted, {})
    status = found.get("versionStatus", "UNSUPPORTED")
    subject = f"kubernetesVersion {wanted}"
    if status == "STANDARD_SUPPORT":
        yield Finding(rule="kubernetes-version", resource=subject, severity="info",
                      message=f"standard support{_until(found.get('endOfStandardSupportDate'))}")
    elif status == "EXTENDED_SUPPORT":
        yield Finding(rule="kubernetes-version", resource=subject, severity="warning",
                      message="extended support, at an extra hourly charge"
                      f"{_until(found.get('endOfExtendedSupportDate'))}",
                      fix=f"move to a version in standard support: {_names(standard)}")
    else:
        yield Finding(rule="kubernetes-version", resource=subject, severity="error",
                      message=f"EKS in {config.region} does not offer {wanted}",
                      fix=f"set kubernetesVersion to one of {_names(standard)}")


CHECKS: dict[str, Check] = {
    "instance-offerings": check_offerings,
    "efa": check_efa,
    "vcpu-quota": check_quotas,
    "capacity-reservations": check_reservations,
    "s3-buckets": check_buckets,
    "kubernetes-version": check_kubernetes_version,
}
