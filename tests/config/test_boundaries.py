"""The edges of the validation rules: the last value a rule accepts and the first it refuses."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from components.network import subnet_layout
from components.problems import ConfigError, Problem
from components.validation import parse_cluster_config
from tests.config.helpers import raw_config


def _found(raw: dict[str, Any], rule: str) -> list[Problem]:
    try:
        _, problems = parse_cluster_config(raw, "test.yaml")
    except ConfigError as exc:
        problems = exc.problems
    return [p for p in problems if p.rule == rule]


def _existing_vpc(raw: dict[str, Any]) -> None:
    net = raw["network"]
    del net["vpcCidr"], net["availabilityZones"]
    net.update(vpcId="vpc-0abc", privateSubnetIds=["subnet-1", "subnet-2"])


@pytest.mark.parametrize(("prefix", "refused"), [(16, False), (20, False), (21, True), (23, True), (24, True)])
def test_vpc_cidr_size_accepts_16_to_20_only(prefix: int, refused: bool) -> None:
    raw = raw_config("dev")
    raw["network"]["vpcCidr"] = f"10.0.0.0/{prefix}"
    assert bool(_found(raw, "vpc-cidr-size")) is refused


@pytest.mark.parametrize(("zones", "refused"), [(7, False), (8, True)])
def test_at_most_seven_zones(zones: int, refused: bool) -> None:
    raw = raw_config("dev")
    raw["network"]["availabilityZones"] = [f"us-west-2{chr(ord('a') + i)}" for i in range(zones)]
    assert bool(_found(raw, "availability-zones")) is refused


@pytest.mark.parametrize("zones", range(2, 9))
def test_private_and_public_subnets_overlap_only_past_seven_zones(zones: int) -> None:
    """Why the zone limit is 7: the 8th private subnet would be the eighth the public subnets are cut from."""
    private, public = subnet_layout("10.0.0.0/16", zones)
    overlap = any(ipaddress.ip_network(a).overlaps(ipaddress.ip_network(b)) for a in private for b in public)
    assert overlap is (zones > 7)


def test_efa_zone_of_another_region_is_refused_with_an_existing_vpc() -> None:
    """With vpcId no zone list exists, so efa-zone's region check is the only one that sees the zone."""
    raw = raw_config("prod")
    _existing_vpc(raw)
    raw["network"]["efaAvailabilityZone"] = "us-east-1a"
    assert [p.path for p in _found(raw, "efa-zone")] == ["network.efaAvailabilityZone"]
    raw["network"]["efaAvailabilityZone"] = "us-west-2b"
    assert _found(raw, "efa-zone") == []


@pytest.mark.parametrize(("gib", "refused"), [(1200, False), (2400, False), (3600, True), (4800, False),
                                              (6000, True), (7200, False)])
def test_fsx_capacity_is_1200_2400_or_a_multiple_of_2400(gib: int, refused: bool) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["capacityGiB"] = gib
    assert bool(_found(raw, "fsx-capacity")) is refused


def test_min_nodes_equal_to_max_nodes_is_valid() -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"].update(minNodes=2, maxNodes=2)
    assert _found(raw, "node-counts") == []


@pytest.mark.parametrize(("reservation", "refused"), [
    ("cr-0123456789abcdef0", False), ("cr-01234567", False),
    ("cr-0123456", True), ("cr-0123456789abcdef01", True), ("cr-0123456789ABCDEF0", True),
    ("0123456789abcdef0", True), ("cr-0123456789abcdefg", True),
])
def test_capacity_reservation_id_format(reservation: str, refused: bool) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="reserved", capacityReservationIds=[reservation])
    found = [p for p in _found(raw, "capacity-reservations") if "not a capacity reservation ID" in p.message]
    assert bool(found) is refused


def test_nested_repository_listed_before_its_parent_overlaps() -> None:
    raw = raw_config("prod")
    repos = raw["storage"]["fsx"]["repositories"]
    repos[0]["path"], repos[1]["path"] = "/data/ckpt", "/data"
    found = _found(raw, "fsx-repositories")
    assert [(p.path, p.message) for p in found] == [
        ("storage.fsx.repositories[1].path", "overlaps the repository at /data/ckpt")]


@pytest.mark.parametrize(("count", "refused"), [(8, False), (9, True)])
def test_at_most_eight_repositories(count: int, refused: bool) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["repositories"] = [{"path": f"/d{i}", "s3": f"s3://ml-data/d{i}", "import": ["NEW"]}
                                             for i in range(count)]
    assert bool(_found(raw, "fsx-repositories")) is refused
