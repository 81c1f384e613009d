"""The cost as people read it: the table's totals, the change between two plans (the PR comment), the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scripts.cli.main import app
from scripts.cost.estimate import estimate
from scripts.cost.price_table import TABLE_PATH
from scripts.cost.render import delta_markdown, delta_summary, footnotes, gaps, signed
from scripts.offline.plan import write_plan
from tests.cost.plans import group, plan, resource, table


def test_one_more_h100_node_at_max() -> None:
    before = estimate(plan(partitions={"gpu": group(["p5.48xlarge"], 0, 8)}), table())
    after = estimate(plan(partitions={"gpu": group(["p5.48xlarge"], 0, 9)}), table())
    assert delta_summary(before, after) == "+$55.04/h at max, +$0.00/h idle"
    text = delta_markdown(before, after)
    assert "| partition | gpu | +$0.00 ($0.00) | +$55.04 ($495.36) |" in text


def test_removed_partition_and_sign() -> None:
    before = estimate(plan(partitions={"a": group(["p4d.24xlarge"], 1, 2)}), table())
    after = estimate(plan(), table())
    assert delta_summary(before, after) == "-$43.92/h at max, -$21.96/h idle"
    assert signed(0.001) == "+$0.00" and signed(-0.001) == "+$0.00"


def test_unpriced_lines_make_totals_lower_bounds() -> None:
    e = estimate(plan(partitions={"t": group(["trn2.48xlarge"], 0, 1)}), table())
    [gap] = gaps(e, table())
    assert (gap.rule, gap.severity, gap.resource, gap.message) == (
        "no-price", "warning", "partition t", "no price: trn2.48xlarge in us-east-1")
    assert "cost --refresh" in gap.fix and not any(n.startswith("no price") for n in footnotes(e, table()))
    assert "Not in the totals (no price): trn2.48xlarge in us-east-1." in delta_markdown(e, e)


def test_diff_cli_adds_the_cost_change(tmp_path: Path) -> None:
    for name, nodes in (("base", 8), ("head", 9)):
        node_pool = resource("kubernetes:karpenter.sh/v1:NodePool", "gpu-h100", spec={"limits": {"cpu": 192 * nodes}})
        write_plan(plan("us-west-2", {"gpu-h100": group(["p5.48xlarge"], 0, nodes)}, [node_pool]), tmp_path / name)
    result = CliRunner().invoke(app, ["diff", str(tmp_path / "base"), str(tmp_path / "head"), "--format",
                                      "markdown"])
    assert result.exit_code == 0, result.output
    assert "**+$55.04/h at max, +$0.00/h idle**" in result.output
    text = CliRunner().invoke(app, ["diff", str(tmp_path / "base"), str(tmp_path / "head")]).output
    assert text.endswith("cost: +$55.04/h at max, +$0.00/h idle\n")


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_cost_cli_on_the_prod_stack(fmt: str) -> None:
    result = CliRunner().invoke(app, ["cost", "--stack", "prod", "--format", fmt], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    if fmt == "json":
        data = json.loads(result.output)
        assert data["region"] == "us-west-2" and data["total"]["max"] > 1800
        assert data["missing"] == [] and data["findings"] == []  # every fixed item of prod has a sourced price
        assert data["total"]["idle"] > 2.5  # EKS, NAT, system and login nodes, FSx, RDS, NLBs
    else:
        assert "cost of stack prod in us-west-2" in result.output and "gpu-h100" in result.output
        assert "no price" not in result.output and "≥" not in result.output


def test_cost_cli_names_what_has_no_price() -> None:
    # dev's SCRATCH_2 file system: no sourced price, and not an item the Price List refresh asks for
    result = CliRunner().invoke(app, ["cost", "--stack", "dev", "--format", "json"], env={"COLUMNS": "200"})
    data = json.loads(result.output)
    assert data["missing"] == ["fsxGbMonth:SCRATCH_2 in us-west-2"]
    (finding,) = data["findings"]
    assert finding["message"] == "no price: fsxGbMonth:SCRATCH_2 in us-west-2"
    assert "does not fetch this item" in finding["fix"] and data["counts"]["warning"] == 1
    text = CliRunner().invoke(app, ["cost", "--stack", "dev"], env={"COLUMNS": "200"}).output
    assert "warning[no-price] " in text and "    no price: fsxGbMonth:SCRATCH_2 in us-west-2\n" in text
    assert "≥$" in text  # the totals are lower bounds


def test_refresh_without_credentials_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    write_plan(plan("us-west-2"), tmp_path / "p")
    shutil.copy(TABLE_PATH, tmp_path / "prices.json")
    result = CliRunner().invoke(app, ["cost", "--stack", "s", "--plan", str(tmp_path / "p"), "--refresh",
                                      "--prices", str(tmp_path / "prices.json")])
    assert result.exit_code == 2 and "the Price List API did not answer" in result.output
    assert (tmp_path / "prices.json").read_text() == TABLE_PATH.read_text()  # nothing written


def test_a_plan_of_another_stack_is_not_priced_under_this_ones_name(tmp_path: Path) -> None:
    write_plan(plan("us-west-2"), tmp_path / "p")  # a plan of stack "s"
    result = CliRunner().invoke(app, ["cost", "--stack", "prod", "--plan", str(tmp_path / "p")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip() == (f"error: --plan {tmp_path / 'p'} is a plan of stack s, not prod: give --stack s, "
                                     "or a plan of prod (`slurm-eks plan --stack prod --out DIR`)")
    assert CliRunner().invoke(app, ["cost", "--stack", "s", "--plan", str(tmp_path / "p")]).exit_code == 0


def test_no_changes_no_cost_line(tmp_path: Path) -> None:
    write_plan(plan("us-west-2", {"gpu-h100": group(["p5.48xlarge"], 0, 8)}), tmp_path / "p")
    result = CliRunner().invoke(app, ["diff", str(tmp_path / "p"), str(tmp_path / "p")])
    assert result.output == "No changes.\n"


def test_the_table_reads_at_80_columns() -> None:
    """No line past 80 columns, and what must stay whole stays whole: money, instance types, resource names."""
    result = CliRunner().invoke(app, ["cost", "--stack", "prod"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.split("\n")
    table = lines[:next(i for i, line in enumerate(lines) if line.startswith("at maxNodes"))]
    assert max(len(line) for line in table) <= 80, "\n".join(table)
    words = {word for line in table for word in line.split()}
    for whole in ("p4de.24xlarge", "trn1n.32xlarge", "slurm-db-mariadb", "PERSISTENT_2", "$792.96", "$1,811.58",
                  "processed", "(LCU)"):
        assert whole in words, f"{whole} was cut: {sorted(words)}"
