"""EC2 DescribeInstanceTopology through a boto3 EC2 client: the requests, a batch of instances at a time and every
page, and the instances each response lists.

Names are those of botocore's EC2 model (botocore 1.44.8, botocore/data/ec2/2016-11-15/service-2.json.gz): operation
DescribeInstanceTopology, shapes DescribeInstanceTopologyRequest (InstanceIds, MaxResults, NextToken),
DescribeInstanceTopologyResult (Instances, NextToken) and InstanceTopology. botocore pages through NextToken
itself (data/ec2/2016-11-15/paginators-1.json: DescribeInstanceTopology, result_key Instances).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.client import BaseClient

OPERATION = "describe_instance_topology"  # boto3's name of DescribeInstanceTopology
# DescribeInstanceTopologyRequest.InstanceIds: "Maximum 100 explicitly specified instance IDs";
# DescribeInstanceTopologyMaxResults: min 1, max 100 (default 20). MaxResults and instance IDs may not be given
# together ("You can't specify this parameter and the instance IDs parameter in the same request").
MAX_INSTANCE_IDS = 100
MAX_RESULTS = 100


@dataclass(frozen=True)
class InstanceTopology:
    """One InstanceTopology. `network_nodes` top layer first, the node the instance connects to last:
    "The network node set comprises NN1, NN2, and NN4, expressed hierarchically from the upper layers to the
    bottom layer" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html).
    Empty for an instance type the API does not cover or an instance that is not running (InstanceTopology
    .NetworkNodes: "The value is null or empty if ...")."""

    instance_id: str
    instance_type: str
    availability_zone: str
    network_nodes: tuple[str, ...]
    capacity_block_id: str | None = None

    @property
    def placed(self) -> bool:
        return bool(self.network_nodes)


def _text(item: Mapping[str, Any], name: str) -> str | None:
    return (item.get(name) or "").strip() or None


def _required(item: Mapping[str, Any], name: str) -> str:
    value = _text(item, name)
    if value is None:
        raise ValueError(f"DescribeInstanceTopology instance without {name}")
    return value


def instance(item: Mapping[str, Any]) -> InstanceTopology:
    """One member of DescribeInstanceTopologyResult.Instances. The model marks none of InstanceTopology's members
    required, but an instance without its id, type or zone cannot be placed: refused."""
    return InstanceTopology(
        instance_id=_required(item, "InstanceId"),
        instance_type=_required(item, "InstanceType"),
        availability_zone=_required(item, "AvailabilityZone"),
        network_nodes=tuple(node.strip() for node in item.get("NetworkNodes") or () if node and node.strip()),
        capacity_block_id=_text(item, "CapacityBlockId"),
    )


def read_pages(pages: Iterable[Mapping[str, Any]]) -> tuple[InstanceTopology, ...]:
    """All instances of the pages of one listing, each instance once (a later page's record wins)."""
    found: dict[str, InstanceTopology] = {}
    for page in pages:
        for item in page.get("Instances") or ():
            record = instance(item)
            found[record.instance_id] = record
    return tuple(found.values())


def batches(instance_ids: Sequence[str], size: int = MAX_INSTANCE_IDS) -> list[tuple[str, ...]]:
    """`instance_ids` (duplicates dropped, order kept) in groups of at most `size`, one request each."""
    if not 1 <= size <= MAX_INSTANCE_IDS:
        raise ValueError(f"batch size must be 1..{MAX_INSTANCE_IDS}, got {size}")
    unique = list(dict.fromkeys(instance_ids))
    return [tuple(unique[start:start + size]) for start in range(0, len(unique), size)]


def request(instance_ids: Sequence[str]) -> dict[str, Any]:
    """The paginator's arguments for one listing: the given instances, or with none, every instance a page of
    MAX_RESULTS at a time (PaginationConfig.PageSize is sent as the paginator's limit_key, MaxResults)."""
    if len(instance_ids) > MAX_INSTANCE_IDS:
        raise ValueError(f"at most {MAX_INSTANCE_IDS} instance ids per call, got {len(instance_ids)}: use batches()")
    if instance_ids:
        return {"InstanceIds": list(instance_ids)}
    return {"PaginationConfig": {"PageSize": MAX_RESULTS}}


def describe(ec2: BaseClient, instance_ids: Sequence[str]) -> list[InstanceTopology]:
    """DescribeInstanceTopology for `instance_ids`, a batch of at most 100 per listing, every page of each."""
    paginator = ec2.get_paginator(OPERATION)
    return [instance(item) for batch in batches(instance_ids)
            for page in paginator.paginate(**request(batch)) for item in page.get("Instances") or ()]
