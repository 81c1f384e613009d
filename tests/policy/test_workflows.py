"""The GitHub Actions workflows: actionlint passes (with shellcheck on their scripts where it is installed),
and the preview workflow covers every shipped stack with the inputs reviewers rely on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"


def actionlint() -> str:
    return require_tool("actionlint", "pip install the dev extra into .venv, or put actionlint on PATH")


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def test_actionlint_passes() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert files
    result = subprocess.run([actionlint(), "-no-color", "-oneline", *files], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


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
