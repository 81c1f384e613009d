"""Parsing DescribeInstanceTopology pages and the Query API parameters of each call."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from slurm.aws.query import EC2_VERSION
from slurm.topology import instance_topology as it
from tests.conftest import require_module
from tests.topology import recorded


def test_pages_parse_to_nine_instances_and_a_next_token_on_the_first() -> None:
    first, second = (it.parse_page(root) for root in recorded.roots())
    assert first.next_token == "eyJ2IjoiMiIsImMiOiJ0b3BvbG9neS1wYWdlLTIifQ=="
    assert second.next_token is None
    listed = [i.instance_id for i in first.instances + second.instances]
    assert listed == [recorded.instance_id(k) for k in range(1, 10)]


def test_network_nodes_keep_the_response_order_top_layer_first() -> None:
    by_id = {i.instance_id: i for i in recorded.instances()}
    one = by_id[recorded.instance_id(1)]
    assert one == it.InstanceTopology(
        instance_id=recorded.instance_id(1),
        instance_type="p5.48xlarge",
        availability_zone="us-east-2b",
        network_nodes=(recorded.SPINE_ODD, recorded.MID_ODD, recorded.LEAF_135),
    )
    assert one.placed


def test_an_uncovered_instance_type_has_no_network_nodes() -> None:
    uncovered = {i.instance_id: i for i in recorded.instances()}[recorded.UNCOVERED]
    assert (uncovered.instance_type, uncovered.network_nodes, uncovered.placed) == ("m5.xlarge", (), False)


def _botocore_parse(xml: bytes) -> dict:
    """The same bytes through botocore's own EC2 response parser and model (an independent reading)."""
    botocore = require_module("botocore", "make test installs it with boto3")
    from botocore import parsers
    from botocore.model import ServiceModel

    model_file = Path(botocore.__file__).parent / "data" / "ec2" / EC2_VERSION / "service-2.json.gz"
    model = ServiceModel(json.loads(gzip.decompress(model_file.read_bytes())))
    output = model.operation_model(it.ACTION).output_shape
    return parsers.create_parser("ec2").parse({"body": xml, "headers": {}, "status_code": 200}, output)


@pytest.mark.parametrize("page", recorded.PAGES, ids=lambda p: p.name)
def test_recorded_pages_read_the_same_with_botocore(page: Path) -> None:
    """Guards the element names: a misspelt one would be dropped by botocore and differ from ours."""
    theirs = _botocore_parse(page.read_bytes())
    ours = it.parse_page(ET.parse(page).getroot())
    assert theirs.get("NextToken") == ours.next_token
    assert [
        (i["InstanceId"], i["InstanceType"], i["AvailabilityZone"], tuple(i.get("NetworkNodes", ())),
         i.get("CapacityBlockId"))
        for i in theirs["Instances"]
    ] == [(i.instance_id, i.instance_type, i.availability_zone, i.network_nodes, i.capacity_block_id)
          for i in ours.instances]


def test_capacity_block_and_missing_node_set() -> None:
    xml = f"""<DescribeInstanceTopologyResponse xmlns="{it.NAMESPACE}"><instanceSet><item>
      <instanceId>i-1</instanceId><instanceType>p6e-gb200.36xlarge</instanceType>
      <availabilityZone>us-east-1a</availabilityZone><capacityBlockId>cb-0123</capacityBlockId>
    </item></instanceSet></DescribeInstanceTopologyResponse>"""
    page = it.parse_page(ET.fromstring(xml))
    assert page.instances[0].capacity_block_id == "cb-0123"
    assert page.instances[0].network_nodes == ()
    assert page.next_token is None


def test_other_documents_are_refused() -> None:
    with pytest.raises(ValueError, match="not a DescribeInstanceTopology response"):
        it.parse_page(ET.fromstring("<DescribeInstanceTopologyResponse/>"))  # no namespace
    with pytest.raises(ValueError, match="without <instanceId>"):
        it.parse_page(ET.fromstring(
            f'<DescribeInstanceTopologyResponse xmlns="{it.NAMESPACE}"><instanceSet><item/></instanceSet>'
            "</DescribeInstanceTopologyResponse>"))


def test_a_later_page_replaces_an_instance_listed_twice() -> None:
    first, second = recorded.roots()
    moved = ET.fromstring(ET.tostring(second))
    moved.find(f"{{{it.NAMESPACE}}}instanceSet/{{{it.NAMESPACE}}}item/{{{it.NAMESPACE}}}instanceId").text = (
        recorded.instance_id(1))
    found = it.parse_pages([first, moved])
    assert len(found) == 8
    assert {i.instance_id: i for i in found}[recorded.instance_id(1)].network_nodes[-1] == recorded.LEAF_68


def test_request_params_name_each_instance_and_never_max_results_with_them() -> None:
    assert it.request_params(["i-a", "i-b"], None) == {
        "InstanceId.1": "i-a", "InstanceId.2": "i-b"}
    assert it.request_params(["i-a"], "tok")["NextToken"] == "tok"


def test_request_params_without_instances_page_through_all() -> None:
    assert it.request_params([], "tok") == {
        "MaxResults": "100", "NextToken": "tok"}


def test_the_limits_match_the_botocore_model() -> None:
    botocore = require_module("botocore", "make test installs it with boto3")
    model_file = Path(botocore.__file__).parent / "data" / "ec2" / EC2_VERSION / "service-2.json.gz"
    shapes = json.loads(gzip.decompress(model_file.read_bytes()))["shapes"]
    assert shapes["DescribeInstanceTopologyMaxResults"]["max"] == it.MAX_RESULTS
    ids = shapes["DescribeInstanceTopologyRequest"]["members"]["InstanceIds"]
    assert ids["locationName"] == "InstanceId"
    assert f"Maximum {it.MAX_INSTANCE_IDS} explicitly specified instance IDs" in ids["documentation"]


def test_batches_of_at_most_100_ids() -> None:
    ids = [f"i-{n:05d}" for n in range(250)] + ["i-00000"]
    groups = it.batches(ids)
    assert [len(group) for group in groups] == [100, 100, 50]
    assert [i for group in groups for i in group] == ids[:250]
    for group in groups:
        assert len([k for k in it.request_params(group, None) if k.startswith("InstanceId.")]) == len(group)
    with pytest.raises(ValueError, match="at most 100"):
        it.request_params(ids[:101], None)
    with pytest.raises(ValueError):
        it.batches(ids, size=101)
