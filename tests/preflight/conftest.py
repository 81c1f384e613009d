"""A moto AWS account prepared for the `prod` stack, and the knobs tests turn to break it.

moto's Service Quotas knows only the `vpc` service, so the account's EC2 vCPU quotas are served by
wrapping moto's own `get_service_quota`: preflight still calls it through the real boto3 client. moto's
offerings data (real AWS data) has no trn1 in us-west-2a, prod's EFA zone; zone names map to different
physical zones in every account, so the prepared account is one whose us-west-2a offers it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS
from moto.servicequotas.models import ServiceQuotasBackend

from components.config.cluster import ClusterConfig
from components.config.stackfile import load_stack

REGION = "us-west-2"
# P, Trn, and G and VT on-demand vCPUs at prod's maxNodes, partitions and Kubernetes pools together.
PROD_QUOTAS = {"L-417A185B": 3456.0, "L-2C3B7624": 4224.0, "L-DB2E81BA": 16.0}


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fake credentials, and every boto3 call answered by moto."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        yield


@pytest.fixture
def quotas(aws: None, monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """The account's EC2 quota values by quota code; tests change them."""
    values = dict(PROD_QUOTAS)
    original = ServiceQuotasBackend.get_service_quota

    def get_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
        if service_code != "ec2" or quota_code not in values:
            return original(self, service_code, quota_code)
        return {"ServiceCode": "ec2", "QuotaCode": quota_code, "QuotaName": quota_code, "Value": values[quota_code],
                "Unit": "None", "Adjustable": True, "GlobalQuota": False}

    monkeypatch.setattr(ServiceQuotasBackend, "get_service_quota", get_service_quota)
    return values


def offer(monkeypatch: pytest.MonkeyPatch, zone: str, *instance_types: str) -> None:
    """Make this account's `zone` offer the instance types."""
    by_region = INSTANCE_TYPE_OFFERINGS["availability-zone"]
    added = [{"InstanceType": t, "Location": zone, "LocationType": "availability-zone"} for t in instance_types]
    monkeypatch.setitem(by_region, REGION, [*by_region[REGION], *added])


@pytest.fixture
def prod_account(quotas: dict[str, float], monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """An account ready for prod: quotas, trn1 in the EFA zone, the FSx bucket in the region."""
    offer(monkeypatch, "us-west-2a", "trn1.32xlarge", "trn1n.32xlarge")
    boto3.client("s3", region_name=REGION).create_bucket(
        Bucket="ml-data", CreateBucketConfiguration={"LocationConstraint": REGION})
    return quotas


@pytest.fixture
def session(aws: None) -> boto3.Session:
    return boto3.Session(region_name=REGION)


@pytest.fixture
def prod() -> ClusterConfig:
    return load_stack("prod")[0]
