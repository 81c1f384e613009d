"""The one finding type (components/findings.py) and its renderers (components/findings_render.py), and the
commands that report in them: validate, check, policy, preflight, accounts, cost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from components.config.problems import ConfigError
from components.findings import Finding, errors, resource_label
from components.findings_render import FIELDS, parse_json, render_block, render_json, render_markdown, render_text
from policy.model import ENFORCEMENT, SEVERITY, Enforcement, ResourceRule
from policy.pack import PreviewResource
from policy.pack_config import parse
from policy.ruleset import RULES, evaluate
from scripts.checks import deploy as check_command  # scripts/cli/check.py imports check_stack when run
from scripts.cli import policy as policy_command
from scripts.cli.accounts import document_finding
from scripts.cli.main import app
from scripts.cli.preflight import outcome
from slurm.agent.accounts.desired import DocumentError
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan

URN = "urn:pulumi:prod::slurm-eks::slurm-eks:index:Cluster$aws:s3/bucketV2:BucketV2::data"
CONFIG = Finding(rule="fsx-capacity", severity="error", path="storage.fsx.capacityGiB", value=1000,
                 message="must be 1200, 2400, or a multiple of 2400 GiB", fix="set 1200 or 2400")
RESOURCE = Finding(rule="s3-encrypted", severity="warning", resource=resource_label(URN), urn=URN,
                   message="no default encryption | SSE-S3 only", fix="encrypt with the stack's KMS key\n(policy/)")
PASSED = Finding(rule="vcpu-quota", severity="info", resource="Running On-Demand P instances (L-417A185B)",
                 message="quota 3456 vCPUs")
WHOLE = Finding(rule="config-shape", severity="error", value=["a", "b"], message="must be a mapping",
                fix="see the config reference")
FIXTURE = [CONFIG, RESOURCE, PASSED, WHOLE]
runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent


def test_a_finding_is_about_a_setting_or_a_thing_and_has_a_known_severity() -> None:
    assert (CONFIG.where, RESOURCE.where, WHOLE.where) == ("storage.fsx.capacityGiB", "data (aws:s3/bucketV2:BucketV2)",
                                                          "")
    with pytest.raises(ValueError, match="not both"):
        Finding(rule="r", severity="error", path="a.b", resource="x (t)", message="m")
    with pytest.raises(ValueError, match="one of error, warning, info"):
        Finding(rule="r", severity="fatal", message="m")  # type: ignore[arg-type]
    assert errors(FIXTURE) == [CONFIG, WHOLE]
    assert resource_label("urn:pulumi:prod::slurm-eks::aws:s3/bucketV2:BucketV2::b") == "b (aws:s3/bucketV2:BucketV2)"


def test_the_finding_type_and_its_renderers_load_without_pulumi() -> None:
    # The policy pack, the config validation and every tool import them: standard library only.
    code = ("import sys, components.findings, components.findings_render; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pydantic', 'yaml', 'scripts')))")
    found = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert found.stdout.strip() == "[]"


def test_text_shows_where_message_value_and_fix() -> None:
    assert render_block(CONFIG) == ("error[fsx-capacity] storage.fsx.capacityGiB\n"
                                    "    must be 1200, 2400, or a multiple of 2400 GiB\n"
                                    "    value: 1000\n"
                                    "    fix: set 1200 or 2400")
    assert render_block(PASSED) == "info[vcpu-quota] Running On-Demand P instances (L-417A185B)\n    quota 3456 vCPUs"
    assert render_block(WHOLE).startswith("error[config-shape]\n    must be a mapping\n    value: ['a', 'b']\n")
    assert render_text(FIXTURE) == "".join(render_block(f) + "\n" for f in FIXTURE) and render_text([]) == ""


def test_markdown_is_one_row_a_finding_with_pipes_and_line_breaks_escaped() -> None:
    lines = render_markdown(FIXTURE).splitlines()
    assert lines[:2] == ["| severity | rule | where | value | message | fix |", "| --- | --- | --- | --- | --- | --- |"]
    assert lines[3] == ("| warning | s3-encrypted | data (aws:s3/bucketV2:BucketV2) |  | no default encryption \\| "
                        "SSE-S3 only | encrypt with the stack's KMS key<br>(policy/) |")
    assert all(line.count("|") - line.count("\\|") == 7 for line in lines)  # six cells a row, whatever they hold
    assert render_markdown([PASSED]).splitlines()[0] == "| severity | rule | where | message | fix |"  # no values
    assert render_markdown([]) == ""


def test_json_round_trips_with_stable_sorted_keys() -> None:
    text = render_json(FIXTURE, stack="prod")
    assert parse_json(text) == FIXTURE
    document = json.loads(text)
    assert list(document) == ["counts", "findings", "stack"]
    assert document["counts"] == {"error": 2, "warning": 1, "info": 1}
    assert all(list(item) == sorted(FIELDS) for item in document["findings"])
    assert document["findings"][2] == {"fix": "", "message": "quota 3456 vCPUs", "path": "",
                                       "resource": "Running On-Demand P instances (L-417A185B)", "rule": "vcpu-quota",
                                       "severity": "info", "urn": "", "value": None}


def test_a_config_error_carries_its_findings_and_reads_as_text() -> None:
    exc = ConfigError([CONFIG, PASSED], "stacks/Pulumi.x.yaml")
    assert exc.errors == [CONFIG]
    assert str(exc) == f"stacks/Pulumi.x.yaml: 1 error in slurm-eks:cluster\n{render_text([CONFIG, PASSED])}".rstrip()


def test_a_policy_violation_is_a_finding_at_its_level_for_the_stack() -> None:
    assert dict(SEVERITY) == {Enforcement.mandatory: "error", Enforcement.advisory: "warning"}
    assert {ENFORCEMENT[s] for s in SEVERITY.values()} == set(Enforcement)
    rule = next(r for r in RULES if isinstance(r, ResourceRule) and r.name == "imdsv2-required")
    urn = "urn:pulumi:prod::slurm-eks::aws:ec2/launchTemplate:LaunchTemplate::nodes"
    broken = PreviewResource(urn, "aws:ec2/launchTemplate:LaunchTemplate", "nodes",
                             {"metadataOptions": {"httpTokens": "optional"}}, ())
    [found] = rule.evaluate(broken)
    assert (found.rule, found.severity, found.urn, found.resource, found.fix) == (
        rule.name, "error", urn, "nodes (aws:ec2/launchTemplate:LaunchTemplate)", rule.fix)
    advisory = parse({rule.name: "advisory"}, RULES)
    assert {f.severity for f in evaluate([broken], advisory) if f.rule == rule.name} == {"warning"}


def test_preflight_counts_each_check_by_its_severity() -> None:
    assert outcome([PASSED, RESOURCE, CONFIG, CONFIG]) == "1 pass, 1 warn, 2 fail"


def test_a_document_the_accounts_reconcile_cannot_read_is_a_finding_at_the_cli(tmp_path: Path) -> None:
    found = document_finding(DocumentError("accounts.a.Parent: no account 'nope'"))
    assert (found.rule, found.severity, found.where, found.message) == (
        "accounts-document", "error", "", "accounts.a.Parent: no account 'nope'")
    assert "accounts desired" in found.fix
    (tmp_path / "d.json").write_text(json.dumps({"format": 1, "cluster": "c", "accounts": {"a": {"Parent": "x"}}}))
    result = runner.invoke(app, ["accounts", "plan", "--desired", str(tmp_path / "d.json")])
    assert result.exit_code == 1
    assert "error[accounts-document]\n    accounts.a.Parent: no account 'x'\n    fix: write" in result.output


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_check_and_policy_in_every_format(monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    plan = shipped_plan("dev")
    monkeypatch.setattr(check_command, "check_stack", lambda stack, stacks_dir: (plan, [CONFIG, RESOURCE]))
    monkeypatch.setattr(policy_command, "check_stack", lambda stack, stacks_dir, path: (plan, parse({}, RULES),
                                                                                        [RESOURCE]))
    checked = runner.invoke(app, ["check", "--stack", "dev", "--format", fmt])
    advised = runner.invoke(app, ["policy", "--stack", "dev", "--format", fmt])
    assert (checked.exit_code, advised.exit_code) == (1, 0)  # an error fails the check; an advisory violation not
    if fmt == "json":
        assert parse_json(checked.output) == [CONFIG, RESOURCE] and parse_json(advised.output) == [RESOURCE]
        assert json.loads(checked.output)["summary"].startswith("stack dev: 1 error and 1 warning")
        assert json.loads(advised.output)["summary"].startswith("stack dev: 0 mandatory and 1 advisory violations")
    else:
        assert checked.output.startswith(render_markdown([CONFIG, RESOURCE]) + "\nstack dev: 1 error and 1 warning")
        assert advised.output.startswith(render_markdown([RESOURCE]) + "\nstack dev: 0 mandatory and 1 advisory")


def test_validate_as_json(tmp_path: Path) -> None:
    raw = raw_config("dev")
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    no_kms = runner.invoke(app, ["validate", "--stack", "dev", "--stacks-dir", str(tmp_path), "--format", "json"])
    assert no_kms.exit_code == 2
    assert [(f.rule, f.path) for f in errors(parse_json(no_kms.stdout))] == [("secrets-provider", "secretsprovider")]
    raw["storage"]["fsx"]["capacityGiB"] = 1000
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    bad = runner.invoke(app, ["validate", "--stack", "dev", "--stacks-dir", str(tmp_path), "--format", "json"])
    document = json.loads(bad.stdout)
    assert bad.exit_code == 2 and document["summary"].endswith("1 error in slurm-eks:cluster")
    assert [(f["rule"], f["path"], f["value"]) for f in document["findings"] if f["severity"] == "error"] == [
        ("fsx-capacity", "storage.fsx.capacityGiB", 1000)]
    valid = runner.invoke(app, ["validate", "--stack", "prod", "--format", "json"])
    assert valid.exit_code == 0 and json.loads(valid.stdout)["summary"].startswith("stack prod: valid")
