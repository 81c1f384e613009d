"""Values that parse but cannot be meant: a region AWS does not have, node counts no VPC can hold, a stack file given
where its name goes, a YAML error named after its file. Each is refused with the path, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.config.problems import ConfigError
from components.config.rules.cluster import aws_regions
from components.config.stackfile import STACKS_DIR, read_pulumi_config, stack_file
from components.config.subnet_layout import private_addresses
from tests.config.helpers import problems_of_rule, raw_config


def test_the_regions_come_from_botocores_own_partitions_data() -> None:
    version, regions = aws_regions()
    assert version.startswith("1.") and {"us-west-2", "us-east-1", "eu-west-1", "us-gov-west-1"} <= regions
    assert "aws-global" not in regions


@pytest.mark.parametrize(("region", "hint"), [("us-west-9", "did you mean us-west-2? "), ("xx-nowhere-1", "")])
def test_a_region_aws_does_not_have_is_refused_and_its_zones_are_not_suggested(region: str, hint: str) -> None:
    raw = raw_config("prod")
    raw["region"] = region
    (problem,) = problems_of_rule(raw, "region")
    assert problem.severity == "error" and problem.value == region
    assert problem.message.startswith("not a region AWS has (botocore 1.")
    assert problem.fix.startswith(f"{hint}use a region such as us-west-2; if AWS opened it after botocore")
    zones = problems_of_rule(raw, "availability-zones") + problems_of_rule(raw, "efa-zone")
    assert zones and all(f"{region}a" not in z.fix and "fix `region` first" in z.fix for z in zones), zones


def test_every_shipped_region_is_known() -> None:
    for stack in ("dev", "prod"):
        assert problems_of_rule(raw_config(stack), "region") == []


def test_max_nodes_past_the_private_subnets_addresses_are_refused() -> None:
    raw = raw_config("prod")
    addresses = private_addresses(raw["network"]["vpcCidr"], len(raw["network"]["availabilityZones"]))
    assert addresses == 3 * (2 ** 13 - 5)  # three /19s of the /16, less the five AWS keeps in each
    assert problems_of_rule(raw, "max-nodes-addresses") == []
    raw["partitions"]["gpu-h100"]["maxNodes"] = 100_000_000
    (problem,) = problems_of_rule(raw, "max-nodes-addresses")
    assert problem.path == "partitions.gpu-h100.maxNodes" and problem.value == 100_000_000
    assert f"more than the {addresses} addresses of the private subnets of 10.0.0.0/16" in problem.message
    assert "a 512-GPU run is 64 nodes of 8 GPUs" in problem.fix


def test_a_stack_files_path_given_as_the_stack_says_which_name_to_give() -> None:
    with pytest.raises(ConfigError) as caught:
        stack_file("stacks/Pulumi.dev.yaml")
    (finding,) = caught.value.findings
    assert finding.message == "--stack takes a stack's name, not its file"
    assert finding.fix == "--stack dev (the file is <stacks-dir>/Pulumi.<stack>.yaml)"
    with pytest.raises(ConfigError) as elsewhere:
        stack_file("/tmp/team/Pulumi.research.yaml", STACKS_DIR)
    assert elsewhere.value.findings[0].fix.startswith("--stack research --stacks-dir /tmp/team ")


def test_a_yaml_error_names_the_file_and_keeps_the_line_shown(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text("config:\n  slurm-eks:cluster:\n    region: [us-west-2, [bold]x]]\n")
    with pytest.raises(ConfigError) as caught:
        read_pulumi_config(path)
    message = caught.value.findings[0].message
    assert "<unicode string>" not in message and f'in "{path}", line 3, column 13' in message
    assert "region: [us-west-2, [bold]x]]" in message  # the snippet, brackets and all
