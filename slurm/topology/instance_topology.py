"""EC2 DescribeInstanceTopology over the Query API: the request parameters of each call and the instances of
each response page.

Element and parameter names are those of botocore's EC2 model (botocore 1.44.8,
botocore/data/ec2/2016-11-15/service-2.json.gz): operation DescribeInstanceTopology, shapes
DescribeInstanceTopologyRequest, DescribeInstanceTopologyResult and InstanceTopology, their `locationName`s.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurm.aws.query import EC2_NAMESPACE as NAMESPACE

ACTION = "DescribeInstanceTopology"
# DescribeInstanceTopologyRequest.InstanceIds: "Maximum 100 explicitly specified instance IDs";
# DescribeInstanceTopologyMaxResults: min 1, max 100 (default 20). MaxResults and instance IDs may not be given
# together ("You can't specify this parameter and the instance IDs parameter in the same request").
MAX_INSTANCE_IDS = 100
MAX_RESULTS = 100


@dataclass(frozen=True)
class InstanceTopology:
    """One `instanceSet/item`. `network_nodes` top layer first, the node the instance connects to last:
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


@dataclass(frozen=True)
class TopologyPage:
    instances: tuple[InstanceTopology, ...]
    # DescribeInstanceTopologyResult.NextToken: "null when there are no more items to return".
    next_token: str | None


def _tag(name: str) -> str:
    return f"{{{NAMESPACE}}}{name}"


def _text(element: ET.Element, name: str) -> str | None:
    found = element.find(_tag(name))
    text = found.text.strip() if found is not None and found.text else ""
    return text or None


def _required(element: ET.Element, name: str) -> str:
    value = _text(element, name)
    if value is None:
        raise ValueError(f"DescribeInstanceTopology item without <{name}>")
    return value


def _instance(item: ET.Element) -> InstanceTopology:
    nodes = item.find(_tag("networkNodeSet"))
    network_nodes = () if nodes is None else tuple(
        node.text.strip() for node in nodes.findall(_tag("item")) if node.text and node.text.strip()
    )
    return InstanceTopology(
        instance_id=_required(item, "instanceId"),
        instance_type=_required(item, "instanceType"),
        availability_zone=_required(item, "availabilityZone"),
        network_nodes=network_nodes,
        capacity_block_id=_text(item, "capacityBlockId"),
    )


def parse_page(root: ET.Element) -> TopologyPage:
    """One DescribeInstanceTopologyResponse document (its root element)."""
    if root.tag != _tag(f"{ACTION}Response"):
        raise ValueError(f"not a {ACTION} response: <{root.tag}>")
    instance_set = root.find(_tag("instanceSet"))
    items = [] if instance_set is None else instance_set.findall(_tag("item"))
    return TopologyPage(tuple(_instance(item) for item in items), _text(root, "nextToken"))


def parse_pages(roots: Iterable[ET.Element]) -> tuple[InstanceTopology, ...]:
    """All instances of the pages of one listing, each instance once (a later page's record wins)."""
    found: dict[str, InstanceTopology] = {}
    for root in roots:
        for instance in parse_page(root).instances:
            found[instance.instance_id] = instance
    return tuple(found.values())


def batches(instance_ids: Sequence[str], size: int = MAX_INSTANCE_IDS) -> list[tuple[str, ...]]:
    """`instance_ids` (duplicates dropped, order kept) in groups of at most `size`, one call each."""
    if not 1 <= size <= MAX_INSTANCE_IDS:
        raise ValueError(f"batch size must be 1..{MAX_INSTANCE_IDS}, got {size}")
    unique = list(dict.fromkeys(instance_ids))
    return [tuple(unique[start:start + size]) for start in range(0, len(unique), size)]


def request_params(instance_ids: Sequence[str], next_token: str | None) -> dict[str, str]:
    """Query API parameters of one call: the given instances (`InstanceId.N`), or with none, every instance a
    page of MAX_RESULTS at a time. Action and Version, common to every call
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/CommonParameters.html), are the client's
    (slurm/aws/query.py QueryClient.call). Lists are flattened as
    `<locationName>.N` from 1 (botocore/serialize.py, EC2Serializer._serialize_type_list)."""
    if len(instance_ids) > MAX_INSTANCE_IDS:
        raise ValueError(f"at most {MAX_INSTANCE_IDS} instance ids per call, got {len(instance_ids)}: use batches()")
    params: dict[str, str] = {}
    if instance_ids:
        params.update({f"InstanceId.{index}": instance_id for index, instance_id in enumerate(instance_ids, 1)})
    else:
        params["MaxResults"] = str(MAX_RESULTS)
    if next_token:
        params["NextToken"] = next_token
    return params
