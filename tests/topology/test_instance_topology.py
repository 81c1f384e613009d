"""DescribeInstanceTopology through the agents' boto3 client, answered by botocore's Stubber (tests/agent/ec2.py:
moto has no DescribeInstanceTopology): the requests of each batch and page, and the instances read from the
answers."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import pytest

from slurm.agent.topology import instance_topology as it
from tests.agent.ec2 import stubbed_ec2
from tests.topology import recorded

EC2_MODEL = Path(botocore.__file__).parent / "data" / "ec2" / "2016-11-15" / "service-2.json.gz"


def test_botocore_pages_the_operation(monkeypatch: pytest.MonkeyPatch) -> None:
    # describe() relies on botocore's paginator (data/ec2/2016-11-15/paginators-1.json) to follow NextToken.
    ec2, _ = stubbed_ec2(monkeypatch)
    assert ec2.can_paginate(it.OPERATION)


def test_both_recorded_pages_are_read_following_next_token(monkeypatch: pytest.MonkeyPatch) -> None:
    ec2, stub = stubbed_ec2(monkeypatch)
    first, second = recorded.pages()
    ids = [recorded.instance_id(k) for k in range(1, 10)]
    stub.add_response(it.OPERATION, first, {"InstanceIds": ids})
    stub.add_response(it.OPERATION, second, {"InstanceIds": ids, "NextToken": first["NextToken"]})
    found = it.describe(ec2, ids)
    stub.assert_no_pending_responses()
    assert [i.instance_id for i in found] == ids


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


def test_capacity_block_and_missing_network_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    ec2, stub = stubbed_ec2(monkeypatch)
    stub.add_response(it.OPERATION, {"Instances": [
        {"InstanceId": "i-1", "InstanceType": "p6e-gb200.36xlarge", "AvailabilityZone": "us-east-1a",
         "CapacityBlockId": "cb-0123"}]}, {"InstanceIds": ["i-1"]})
    (found,) = it.describe(ec2, ["i-1"])
    assert (found.capacity_block_id, found.network_nodes) == ("cb-0123", ())


@pytest.mark.parametrize("missing", ["InstanceId", "InstanceType", "AvailabilityZone"])
def test_an_instance_without_a_required_field_is_refused(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    item: dict[str, Any] = {"InstanceId": "i-1", "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-2b"}
    del item[missing]
    ec2, stub = stubbed_ec2(monkeypatch)
    stub.add_response(it.OPERATION, {"Instances": [item]}, {"InstanceIds": ["i-1"]})
    with pytest.raises(ValueError, match=f"without {missing}"):
        it.describe(ec2, ["i-1"])


def test_a_later_page_replaces_an_instance_listed_twice() -> None:
    first, second = recorded.pages()
    second["Instances"][0]["InstanceId"] = recorded.instance_id(1)
    found = it.read_pages([first, second])
    assert len(found) == 8
    assert {i.instance_id: i for i in found}[recorded.instance_id(1)].network_nodes[-1] == recorded.LEAF_68


def test_without_instances_the_listing_pages_through_all_never_max_results_with_ids(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert it.request(["i-a", "i-b"]) == {"InstanceIds": ["i-a", "i-b"]}
    # PaginationConfig.PageSize goes out as the paginator's limit_key, MaxResults, on every page.
    ec2, stub = stubbed_ec2(monkeypatch)
    stub.add_response(it.OPERATION, {"Instances": [], "NextToken": "tok"}, {"MaxResults": it.MAX_RESULTS})
    stub.add_response(it.OPERATION, {"Instances": []}, {"MaxResults": it.MAX_RESULTS, "NextToken": "tok"})
    assert list(ec2.get_paginator(it.OPERATION).paginate(**it.request([])))
    stub.assert_no_pending_responses()


def test_the_limits_match_the_botocore_model() -> None:
    shapes = json.loads(gzip.decompress(EC2_MODEL.read_bytes()))["shapes"]
    assert shapes["DescribeInstanceTopologyMaxResults"]["max"] == it.MAX_RESULTS
    ids = shapes["DescribeInstanceTopologyRequest"]["members"]["InstanceIds"]
    assert f"Maximum {it.MAX_INSTANCE_IDS} explicitly specified instance IDs" in ids["documentation"]


def test_more_than_100_instances_take_one_listing_per_100(monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [f"i-{n:017x}" for n in range(250)] + ["i-00000000000000000"]
    groups = it.batches(ids)
    assert [len(group) for group in groups] == [100, 100, 50]
    assert [i for group in groups for i in group] == ids[:250]
    ec2, stub = stubbed_ec2(monkeypatch)
    for group in groups:
        stub.add_response(it.OPERATION, {"Instances": []}, {"InstanceIds": list(group)})
    assert it.describe(ec2, ids) == []
    stub.assert_no_pending_responses()
    with pytest.raises(ValueError, match="at most 100"):
        it.request(ids[:101])
    with pytest.raises(ValueError):
        it.batches(ids, size=101)
