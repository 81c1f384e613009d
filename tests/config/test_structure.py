"""Structural errors: unknown keys with a hint, missing and mistyped settings, all reported at once."""

from __future__ import annotations

import re

import pytest
import yaml

from components.config.problems import ConfigError
from components.config.stackfile import load_stack
from components.config.validation import parse_cluster_config
from tests.config.helpers import raw_config


def _problems(raw: object) -> list:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw, "test.yaml")
    return caught.value.findings


def test_unknown_key_suggests_the_nearest() -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["throughputPerTib"] = raw["storage"]["fsx"].pop("throughputPerTiB")
    raw["partitions"]["gpu-h100"]["maxNode"] = 3
    found = {p.path: p for p in _problems(raw) if p.severity == "error"}
    assert found["storage.fsx.throughputPerTib"].fix == "did you mean `throughputPerTiB`?"
    assert found["partitions.gpu-h100.maxNode"].fix == "did you mean `maxNodes`?"
    assert all(p.rule == "unknown-key" for p in found.values())


def test_unknown_key_without_a_near_name_lists_the_known_ones() -> None:
    raw = raw_config("dev")
    raw["slurm"]["zzz"] = 1
    (problem,) = _problems(raw)
    assert problem.path == "slurm.zzz" and "accounting" in problem.fix and "login" in problem.fix


def test_all_structural_problems_at_once() -> None:
    raw = raw_config("dev")
    raw.pop("region")
    raw["partitions"]["gpu"]["capacityType"] = "preemptible"
    raw["partitions"]["gpu"]["minNodes"] = -1
    raw["network"]["vpcCidr"] = "10.0.0.0/33"
    found = {p.path: p for p in _problems(raw)}
    assert found["region"].message == "required setting is missing"
    assert "on-demand" in found["partitions.gpu.capacityType"].fix
    assert found["partitions.gpu.minNodes"].fix == "use a value >= 0"
    assert "not a CIDR block" in found["network.vpcCidr"].message


def test_max_time_must_be_a_slurm_time() -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"]["maxTime"] = "2 days"
    (problem,) = _problems(raw)
    assert problem.path == "partitions.gpu.maxTime" and "Slurm time limit" in problem.message


@pytest.mark.parametrize("value", ["UNLIMITED", "90", "30:00", "12:00:00", "2-00", "2-12:00", "7-00:00:00"])
def test_slurm_time_formats_accepted(value: str) -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"]["maxTime"] = value
    config, _ = parse_cluster_config(raw)
    assert config.partitions["gpu"].max_time == value


def test_not_a_mapping() -> None:
    (problem,) = _problems(["region"])
    assert problem.rule == "config-shape"


def test_missing_stack_file_names_the_known_stacks(tmp_path) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text("config: {}\n")
    with pytest.raises(ConfigError) as caught:
        load_stack("staging", tmp_path)
    assert "not found" in caught.value.findings[0].message and "dev" in caught.value.findings[0].fix


def test_misspelt_config_key_in_stack_file(tmp_path) -> None:
    (tmp_path / "Pulumi.x.yaml").write_text("config:\n  slurm-eks:clustr: {}\n")
    with pytest.raises(ConfigError) as caught:
        load_stack("x", tmp_path)
    assert caught.value.findings[0].fix == "rename `slurm-eks:clustr` to `slurm-eks:cluster`"


def test_bad_yaml(tmp_path) -> None:
    (tmp_path / "Pulumi.x.yaml").write_text("config: [unclosed\n")
    with pytest.raises(ConfigError) as caught:
        load_stack("x", tmp_path)
    assert "not valid YAML" in caught.value.findings[0].message


def test_shipped_stacks_are_valid() -> None:
    dev, _ = load_stack("dev")
    prod, warnings = load_stack("prod")
    assert list(dev.partitions) == ["gpu"] and dev.storage.fsx.deployment_type == "SCRATCH_2"
    assert list(prod.partitions) == ["gpu-h100", "gpu-a100", "trainium"]
    assert [w.rule for w in warnings] == ["efa-interface-count"]  # trn1 (8 EFA) with trn1n (16 EFA)


def test_idle_timeout_must_be_a_karpenter_duration() -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"]["idleTimeout"] = "ten minutes"
    (problem,) = _problems(raw)
    assert problem.path == "partitions.gpu.idleTimeout" and "not a duration" in problem.message
    raw["partitions"]["gpu"]["idleTimeout"] = "1h30m"
    config, _ = parse_cluster_config(raw)
    assert config.partitions["gpu"].idle_timeout == "1h30m"


def test_a_typo_does_not_hide_the_semantic_errors() -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"]["maxNode"] = 3  # structural: unknown key
    raw["partitions"]["gpu"]["instanceTypes"] = ["g5.12xlarg"]  # semantic: unknown instance type
    found = {p.rule: p for p in _problems(raw)}
    assert found["unknown-key"].path == "partitions.gpu.maxNode"
    assert "did you mean g5.12xlarge" in found["instance-type-known"].fix


def test_unquoted_kubernetes_version_gets_the_yaml_hint(tmp_path) -> None:
    stack = tmp_path / "Pulumi.t.yaml"
    text = yaml.safe_dump({"config": {"slurm-eks:cluster": raw_config("dev")}})
    stack.write_text(re.sub(r"kubernetesVersion: .*", "kubernetesVersion: 1.30", text))
    with pytest.raises(ConfigError) as caught:
        load_stack("t", tmp_path)
    (problem,) = caught.value.findings
    assert problem.path == "kubernetesVersion" and problem.value == 1.3
    assert "YAML reads an unquoted 1.30 as the number 1.3" in problem.fix


def test_a_minimal_stack_without_storage_is_valid() -> None:
    raw = {
        "region": "us-west-2",
        "kubernetesVersion": "1.33",
        "network": {
            "vpcCidr": "10.0.0.0/16",
            "availabilityZones": ["us-west-2a", "us-west-2b"],
            "deployer": {"via": "public", "cidrs": ["203.0.113.0/24"]},
        },
        "partitions": {"cpu": {"instanceTypes": ["g5.xlarge"], "maxNodes": 2}},
    }
    config, problems = parse_cluster_config(raw, "minimal.yaml")
    assert all(p.severity == "warning" for p in problems)
    assert (config.storage.fsx.deployment_type, config.storage.fsx.throughput_per_tib) == ("PERSISTENT_2", 125)
