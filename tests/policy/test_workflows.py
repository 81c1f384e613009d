"""The GitHub Actions workflows: actionlint passes (with shellcheck on their scripts where it is installed),
zizmor's security audit passes, every action is pinned to a commit, the credentialed preview job is gated,
and the preview workflow covers every shipped stack with the inputs reviewers rely on. Each linter and
check is also shown to fire on a broken workflow."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"


def actionlint() -> str:
    return require_tool("actionlint", "pip install the dev extra into .venv, or put actionlint on PATH")


def zizmor() -> str:
    return require_tool("zizmor", "pip install the dev extra into .venv, or put zizmor on PATH")


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def workflow_files() -> list[Path]:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert files
    return files


# What a pull request's code must never run with: a fork's code and this repository's secrets together.
BROKEN = """\
name: broken
on: pull_request_target
jobs:
  greet:
    runs-on: ubuntu-24.04
    permissions: write-all
    steps:
      - uses: actions/checkout@v5
      - run: echo "${{ github.event.pull_request.title }}"
"""


def run_actionlint(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([actionlint(), "-no-color", "-oneline", *map(str, files)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def zizmor_findings(path: Path) -> set[str]:
    """The audits zizmor reports offline (online audits need the GitHub API) at its regular persona."""
    result = subprocess.run([zizmor(), "--offline", "--no-progress", "--format", "json", str(path)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    # 0: no findings; 10-14: findings by highest severity (docs.zizmor.sh/usage/#exit-codes); else a failure.
    assert result.returncode == 0 or 10 <= result.returncode <= 14, result.stderr
    return {finding["ident"] for finding in json.loads(result.stdout or "[]")}


def test_actionlint_passes() -> None:
    result = run_actionlint(workflow_files())
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_fires_on_an_injection(tmp_path: Path) -> None:
    (tmp_path / "broken.yml").write_text(BROKEN)
    result = run_actionlint([tmp_path / "broken.yml"])
    assert result.returncode == 1 and "github.event.pull_request.title" in result.stdout, result.stdout


def test_zizmor_passes() -> None:
    assert zizmor_findings(WORKFLOWS) == set()


def test_zizmor_fires_on_injection_unpinned_actions_and_excessive_permissions(tmp_path: Path) -> None:
    (tmp_path / "broken.yml").write_text(BROKEN)
    assert {"template-injection", "unpinned-uses", "excessive-permissions", "dangerous-triggers"} <= \
        zizmor_findings(tmp_path / "broken.yml")


# `uses: owner/repo[/path]@<40 hex> # vX.Y.Z`: a tag can be moved to other code, a commit cannot; the comment
# says which release the commit is. Local actions (./) are this repository's own code.
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(.+?)\s*$")


def unpinned_actions(text: str) -> list[str]:
    """Each `uses:` line of a workflow that is not a local action nor pinned to a commit with its version."""
    refs = (m.group(1) for line in text.splitlines() if (m := USES.match(line)))
    return [ref for ref in refs if not ref.startswith("./") and not PINNED.match(ref)]


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit(path: Path) -> None:
    assert unpinned_actions(path.read_text()) == []


def test_the_pin_check_rejects_a_tag_and_a_pin_without_its_version() -> None:
    sha = "fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09"
    text = (f"      - uses: actions/checkout@v5\n      - uses: actions/checkout@{sha}\n"
            f"      - uses: actions/checkout@{sha} # v5.1.0\n      - uses: ./.github/actions/local\n")
    assert unpinned_actions(text) == ["actions/checkout@v5", f"actions/checkout@{sha}"]


def triggers(workflow: dict[str, Any]) -> set[str]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as true
    return {on} if isinstance(on, str) else set(on)


def credential_gate_problems(workflow: dict[str, Any]) -> list[str]:
    """Why the job that gets cloud credentials could run a pull request's code unapproved (empty: it cannot)."""
    job = workflow["jobs"]["pulumi"]
    problems = []
    if "pull_request_target" in triggers(workflow):
        problems.append("on: pull_request_target runs a fork's code with this repository's secrets")
    if job.get("environment") != "preview":
        problems.append(f"environment is {job.get('environment')!r}, not the approval-gated `preview`")
    if job.get("if") != "github.event.pull_request.head.repo.full_name == github.repository":
        problems.append(f"if is {job.get('if')!r}: the job must skip pull requests from forks")
    problems += [f"{step['uses']} persists the GITHUB_TOKEN in .git/config" for step in job["steps"]
                 if step.get("uses", "").startswith("actions/checkout@")
                 and (step.get("with") or {}).get("persist-credentials") is not False]
    return problems


def test_the_credentialed_preview_is_gated() -> None:
    assert credential_gate_problems(load("preview.yml")) == []
    assert all("pull_request_target" not in triggers(yaml.safe_load(p.read_text())) for p in workflow_files())


@pytest.mark.parametrize(("change", "problem"), [
    (lambda w: w.update({True: ["pull_request_target"]}), "pull_request_target"),
    (lambda w: w["jobs"]["pulumi"].pop("environment"), "environment is None"),
    (lambda w: w["jobs"]["pulumi"].pop("if"), "forks"),
    (lambda w: w["jobs"]["pulumi"]["steps"][0].pop("with"), "persists the GITHUB_TOKEN"),
])
def test_the_gate_check_fires_on_each_opening(change: Any, problem: str) -> None:
    workflow = load("preview.yml")
    change(workflow)
    assert any(problem in p for p in credential_gate_problems(workflow))


def test_test_workflow_runs_the_readme_command() -> None:
    steps = load("test.yml")["jobs"]["test"]["steps"]
    assert any(step.get("run") == "make test" for step in steps)


def test_preview_covers_every_shipped_stack() -> None:
    files = (REPO / "stacks").glob("Pulumi.*.yaml")
    stacks = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in files)
    for job in load("preview.yml")["jobs"].values():
        assert sorted(job["strategy"]["matrix"]["stack"]) == stacks


def test_pulumi_preview_comments_with_the_policy_pack() -> None:
    job = load("preview.yml")["jobs"]["pulumi"]
    assert job["permissions"] == {"id-token": "write", "contents": "read", "pull-requests": "write"}
    step = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert {k: step["with"][k] for k in ("command", "diff", "comment-on-pr", "edit-pr-comment", "policyPacks")} == {
        "command": "preview", "diff": True, "comment-on-pr": True, "edit-pr-comment": True, "policyPacks": "policy"}
    assert (REPO / step["with"]["policyPacks"] / "PulumiPolicy.yaml").is_file()
