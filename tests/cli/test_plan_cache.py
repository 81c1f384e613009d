"""The plan cache (scripts/offline/plan_cache.py): a plan is reused only while everything it was made from is the
same (the stack's file, the program's code, the installed SDK and providers), and only by the console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from components.config.stackfile import STACKS_DIR, stack_file
from scripts.offline import plan as plan_module
from scripts.offline import plan_cache
from tests.cli.test_cli import CLI, REPO

pytestmark = pytest.mark.slow


def _tree(root: Path) -> Path:
    """A project tree with the files the key reads: a module of components/ and the stack files."""
    (root / "components").mkdir(parents=True)
    (root / "components" / "program.py").write_text("RESOURCES = 1\n")
    (root / "__main__.py").write_text("import components.program\n")
    shutil.copytree(STACKS_DIR, root / "stacks")
    return root


def test_the_key_follows_the_stack_file_the_code_and_the_stack_name(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    path = root / "stacks" / "Pulumi.dev.yaml"
    first = plan_cache.key("dev", path, root)
    assert plan_cache.key("dev", path, root) == first  # nothing changed: the same entry
    assert plan_cache.key("staging", path, root) != first  # the stack's name is in every URN
    (root / "components" / "program.py").write_text("RESOURCES = 2\n")
    changed_code = plan_cache.key("dev", path, root)
    assert changed_code != first
    path.write_text(path.read_text() + "# a comment\n")
    assert plan_cache.key("dev", path, root) != changed_code
    (root / "components" / "__pycache__").mkdir()
    (root / "components" / "__pycache__" / "program.cpython-311.pyc").write_bytes(b"\0")
    assert plan_cache.key("dev", path, root) == plan_cache.key("dev", path, root)


def test_run_plan_reuses_a_kept_plan_and_replans_an_unreadable_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(plan_cache.ENV, "1")
    monkeypatch.setattr(plan_cache, "CACHE_DIR", tmp_path)
    made = []
    real = plan_module.record
    monkeypatch.setattr(plan_module, "record", lambda *args: made.append(1) or real(*args))
    first, _ = plan_module.run_plan("dev")
    again, _ = plan_module.run_plan("dev")
    assert len(made) == 1 and again.to_json() == first.to_json()
    (entry,) = tmp_path.glob("dev-*.json")
    entry.write_text("{not json")
    replanned, _ = plan_module.run_plan("dev")
    assert len(made) == 2 and replanned.to_json() == first.to_json()
    monkeypatch.setenv(plan_cache.ENV, "0")
    plan_module.run_plan("dev")
    assert len(made) == 3  # off: always planned


def test_the_console_script_says_when_it_plans_and_reuses_the_plan_after(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(STACKS_DIR, stacks)
    with stack_file("dev", stacks).open("a") as stream:
        # a file no other run plans (tmp_path's name repeats from one session to the next), so its first plan is
        # made here even in a checkout whose plan cache already holds this test's earlier runs
        stream.write(f"# {uuid.uuid4()}: planned first here\n")
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop(plan_cache.ENV, None)
    runs = [subprocess.run([str(CLI), "check", "--stack", "dev", "--stacks-dir", str(stacks)], cwd=REPO,
                           capture_output=True, text=True, env=env, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs
    assert "planning stack dev offline under Pulumi's mocks" in runs[0].stderr
    assert "planning stack dev" not in runs[1].stderr and runs[1].stdout == runs[0].stdout


def test_check_and_policy_read_a_given_plan_of_their_stack_only(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scripts.cli.main import app
    from scripts.offline.plan import write_plan
    from tests.plan.fixtures import shipped_plan

    write_plan(shipped_plan("dev"), tmp_path / "dev")
    runner = CliRunner(env={"COLUMNS": "200"})
    for command in ("check", "policy"):
        given = runner.invoke(app, [command, "--stack", "dev", "--plan", str(tmp_path / "dev")])
        planned = runner.invoke(app, [command, "--stack", "dev"])
        assert given.exit_code == planned.exit_code == 0 and given.output == planned.output, given.output
        other = runner.invoke(app, [command, "--stack", "prod", "--plan", str(tmp_path / "dev")])
        assert other.exit_code == 2 and "is a plan of stack dev, not prod: give --stack dev" in other.output
