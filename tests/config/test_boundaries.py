"""The edges of the validation rules: the last value a rule accepts and the first it refuses."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from components.config.slinky_releases import pinning_problem
from components.config.subnet_layout import subnet_layout
from tests.config.helpers import problems_of_rule, raw_config


def _existing_vpc(raw: dict[str, Any]) -> None:
    net = raw["network"]
    del net["vpcCidr"], net["availabilityZones"]
    net.update(vpcId="vpc-0abc", privateSubnetIds=["subnet-1", "subnet-2"])


@pytest.mark.parametrize(("prefix", "refused"), [(16, False), (20, False), (21, True), (23, True), (24, True)])
def test_vpc_cidr_size_accepts_16_to_20_only(prefix: int, refused: bool) -> None:
    raw = raw_config("dev")
    raw["network"]["vpcCidr"] = f"10.0.0.0/{prefix}"
    assert bool(problems_of_rule(raw, "vpc-cidr-size")) is refused


@pytest.mark.parametrize(("zones", "refused"), [(7, False), (8, True)])
def test_at_most_seven_zones(zones: int, refused: bool) -> None:
    raw = raw_config("dev")
    raw["network"]["availabilityZones"] = [f"us-west-2{chr(ord('a') + i)}" for i in range(zones)]
    assert bool(problems_of_rule(raw, "availability-zones")) is refused


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
    assert [p.path for p in problems_of_rule(raw, "efa-zone")] == ["network.efaAvailabilityZone"]
    raw["network"]["efaAvailabilityZone"] = "us-west-2b"
    assert problems_of_rule(raw, "efa-zone") == []


@pytest.mark.parametrize(("gib", "refused"), [(1199, True), (1200, False), (1201, True), (2399, True),
                                              (2400, False), (2401, True), (3600, True), (4800, False),
                                              (6000, True), (7200, False)])
def test_fsx_capacity_is_1200_2400_or_a_multiple_of_2400(gib: int, refused: bool) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["capacityGiB"] = gib
    assert bool(problems_of_rule(raw, "fsx-capacity")) is refused


def test_min_nodes_equal_to_max_nodes_is_valid() -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"].update(minNodes=2, maxNodes=2)
    assert problems_of_rule(raw, "node-counts") == []


@pytest.mark.parametrize(("reservation", "refused"), [
    ("cr-0123456789abcdef0", False), ("cr-01234567", False),
    ("cr-0123456", True), ("cr-0123456789abcdef01", True), ("cr-0123456789ABCDEF0", True),
    ("0123456789abcdef0", True), ("cr-0123456789abcdefg", True),
])
def test_capacity_reservation_id_format(reservation: str, refused: bool) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="reserved", capacityReservationIds=[reservation])
    found = [p for p in problems_of_rule(raw, "capacity-reservations") if "not a capacity reservation ID" in p.message]
    assert bool(found) is refused


def test_nested_repository_listed_before_its_parent_overlaps() -> None:
    raw = raw_config("prod")
    repos = raw["storage"]["fsx"]["repositories"]
    repos[0]["path"], repos[1]["path"] = "/data/ckpt", "/data"
    found = problems_of_rule(raw, "fsx-repositories")
    assert [(p.path, p.message) for p in found] == [
        ("storage.fsx.repositories[1].path", "overlaps the repository at /data/ckpt")]


@pytest.mark.parametrize(("count", "refused"), [(8, False), (9, True)])
def test_at_most_eight_repositories(count: int, refused: bool) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["repositories"] = [{"path": f"/d{i}", "s3": f"s3://ml-data/d{i}", "import": ["NEW"]}
                                             for i in range(count)]
    assert bool(problems_of_rule(raw, "fsx-repositories")) is refused


def _messages(raw: dict[str, Any], rule: str) -> list[tuple[str, Any, str]]:
    return [(p.path, p.value, p.message) for p in problems_of_rule(raw, rule)]


@pytest.mark.parametrize(("version", "refused"), [("1.28", True), ("1.29", False), ("1.30", False)])
def test_kubernetes_1_29_is_the_oldest_version_accepted(version: str, refused: bool) -> None:
    raw = raw_config("dev")
    raw["kubernetesVersion"] = version
    assert bool(problems_of_rule(raw, "kubernetes-version")) is refused


@pytest.mark.parametrize(("version", "refused"), [("1.33", False), ("1.32", True), ("1.34", True)])
def test_only_kubernetes_versions_with_pinned_add_ons_deploy(version: str, refused: bool) -> None:
    raw = raw_config("dev")
    raw["kubernetesVersion"] = version
    assert bool(problems_of_rule(raw, "kubernetes-version-pinned")) is refused


def test_slurm_older_than_25_11_is_refused_as_unsupported() -> None:
    raw = raw_config("dev")
    raw["slurm"]["version"] = "25.10"
    assert _messages(raw, "slurm-version") == [
        ("slurm.version", "25.10", "Slinky 1.2.x runs Slurm 25.11 and newer only")]


@pytest.mark.parametrize(("length", "refused"), [(39, False), (40, False), (41, True)])
def test_partition_names_hold_at_most_40_characters(length: int, refused: bool) -> None:
    raw = raw_config("dev")
    name = ("gpu-" + "a" * 60)[:length]
    raw["partitions"][name] = raw["partitions"].pop("gpu")
    found = problems_of_rule(raw, "partition-name")
    assert [(p.path, p.fix) for p in found] == ([(
        f"partitions.{name}",
        "use lowercase letters, digits and '-' (at most 40), starting and ending with a letter or digit, e.g. gpu-h100",
    )] if refused else [])


@pytest.mark.parametrize("subnets", [2, 3])
def test_an_existing_vpc_with_two_or_more_private_subnets_is_accepted(subnets: int) -> None:
    raw = raw_config("dev")
    _existing_vpc(raw)
    raw["network"]["privateSubnetIds"] = [f"subnet-0{i}a2b3c4d5e6f7a8b9" for i in range(subnets)]
    assert problems_of_rule(raw, "network-source") == []


@pytest.mark.parametrize("cidr", ["10.0.0.0/15", "fd00::/16", "fd00:10::/56"])
def test_a_vpc_cidr_that_is_too_large_or_ipv6_is_refused(cidr: str) -> None:
    raw = raw_config("dev")
    raw["network"]["vpcCidr"] = cidr
    assert _messages(raw, "vpc-cidr-size") == [
        ("network.vpcCidr", cidr, "the VPC must be an IPv4 block between /16 and /20: every pod takes a VPC address")]


def test_an_existing_vpc_takes_its_zones_from_its_subnets() -> None:
    raw = raw_config("dev")
    _existing_vpc(raw)
    assert problems_of_rule(raw, "availability-zones") == []
    raw["network"]["availabilityZones"] = ["us-west-2a", "us-west-2b"]
    assert _messages(raw, "availability-zones") == [
        ("network.availabilityZones", ["us-west-2a", "us-west-2b"],
         "zones come from the existing subnets when vpcId is set")]


def test_a_zone_listed_twice_is_refused() -> None:
    raw = raw_config("dev")
    zones = ["us-west-2a", "us-west-2b", "us-west-2a"]
    raw["network"]["availabilityZones"] = zones
    assert _messages(raw, "availability-zones") == [
        ("network.availabilityZones", zones,
         "a new VPC needs two or more distinct availability zones (EKS requires two)")]


@pytest.mark.parametrize(("gib", "nearest"), [(1000, 1200), (3000, 2400), (3600, 2400), (4000, 4800),
                                              (6000, 4800), (9000, 9600)])
def test_a_refused_fsx_capacity_names_the_nearest_allowed_one(gib: int, nearest: int) -> None:
    """Halfway between two allowed sizes (3600, 6000) the smaller one is named."""
    raw = raw_config("prod")
    raw["storage"]["fsx"]["capacityGiB"] = gib
    fixes = [p.fix for p in problems_of_rule(raw, "fsx-capacity")]
    assert fixes == [f"use 1200, 2400, 4800, 7200, ...; nearest: {nearest}"]


@pytest.mark.parametrize("path", ["/data/", "/data//raw", "data"])
def test_a_repository_path_must_be_a_clean_absolute_directory(path: str) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["repositories"][0]["path"] = path
    assert _messages(raw, "fsx-repositories") == [
        ("storage.fsx.repositories[0].path", path, "not an absolute directory path in the file system")]


def test_a_line_that_is_no_public_key_is_shown_by_its_first_40_characters() -> None:
    raw = raw_config("dev")
    line = "AAAAC3NzaC1lZDI1NTE5AAAAIProdExampleKeyReplaceMeWithYourOwnPublicKey000 oncall@example.com"
    raw["slurm"]["login"]["rootSshKeys"] = [line]  # the key without its `ssh-ed25519` type
    assert _messages(raw, "login-ssh-keys") == [
        ("slurm.login.rootSshKeys[0]", "AAAAC3NzaC1lZDI1NTE5AAAAIProdExampleKeyR", "not an OpenSSH public key")]


@pytest.mark.parametrize(("image", "refused"), [("ubuntu:latest", True), ("ubuntu", True), ("ubuntu:24.04", True),
                                                ("ubuntu:noble-20250404", False), ("ubuntu@sha256:" + "0" * 64, False)])
def test_a_docker_hub_library_image_is_pinned_by_its_tag(image: str, refused: bool) -> None:
    """An image without a registry or repository path (Docker Hub's library/ubuntu) is judged like any other."""
    assert (pinning_problem(image) is not None) == refused  # the policy pack's images-pinned judges by it


@pytest.mark.parametrize(("max_nodes", "refused"), [(0, True), (1, False)])
def test_a_partition_needs_at_least_one_node(max_nodes: int, refused: bool) -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"].update(minNodes=0, maxNodes=max_nodes)
    assert _messages(raw, "node-counts") == (
        [("partitions.gpu.maxNodes", 0, "a partition that can never have a node")] if refused else [])
