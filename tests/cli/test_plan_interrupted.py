"""`slurm-eks plan` never leaves a half-written plan: an interruption keeps the previous plan or leaves none (never a
plan.json beside another plan's manifests, which `diff` would trust), a directory it cannot write is one line before
the plan's seconds are spent, and Ctrl-C is one line and exit 130, never a traceback."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from scripts.offline import plan as plan_module
from scripts.offline.plan import write_plan
from tests.cli.test_cli import CLI, REPO, run
from tests.plan.fixtures import shipped_plan

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dev_plan() -> plan_module.Plan:
    return shipped_plan("dev")


def _previous(out: Path) -> dict[str, str]:
    """A complete earlier plan in `out`: its files and their contents."""
    (out / "manifests").mkdir(parents=True)
    (out / "manifests" / "configmap_slurm_old.yaml").write_text("kind: ConfigMap\n")
    (out / "plan.json").write_text('{"earlier": true}')
    return _files(out)


def _files(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*")) if p.is_file()}


def test_an_interruption_while_writing_manifests_keeps_the_previous_plan(
    tmp_path: Path, dev_plan: plan_module.Plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _previous(tmp_path)
    written = []

    def dump_then_interrupt(doc: object, **kwargs: object) -> str:
        written.append(doc)
        if len(written) == 10:  # the 10th of the plan's manifests
            raise KeyboardInterrupt
        return yaml.safe_dump(doc, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plan_module.yaml, "safe_dump", dump_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_plan(dev_plan, tmp_path)
    assert _files(tmp_path) == before  # nothing of the new plan, nothing staged left behind
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_interruption_while_swapping_leaves_no_plan_rather_than_a_mixed_one(
    tmp_path: Path, dev_plan: plan_module.Plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    _previous(tmp_path)
    real_rename = Path.rename

    def rename(self: Path, target: Path) -> Path:
        if Path(target).name == "plan.json":  # the last step: the new plan.json into place
            raise KeyboardInterrupt
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        write_plan(dev_plan, tmp_path)
    assert not (tmp_path / "plan.json").exists()
    result = run("diff", str(tmp_path), str(tmp_path))
    assert result.returncode == 2 and "cannot read plan" in result.stderr and "Traceback" not in result.stderr


def test_a_whole_plan_replaces_the_previous_one(tmp_path: Path, dev_plan: plan_module.Plan) -> None:
    _previous(tmp_path)
    write_plan(dev_plan, tmp_path)
    names = {p.name for p in (tmp_path / "manifests").iterdir()}
    assert "configmap_slurm_old.yaml" not in names and len(names) == len(dev_plan.manifests())
    assert '"earlier"' not in (tmp_path / "plan.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifests", "plan.json"]


def test_an_out_directory_that_cannot_be_written_is_one_line_before_planning(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    started = time.monotonic()
    result = run("plan", "--stack", "dev", "--out", str(blocker / "plans"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (f"error: --out {blocker / 'plans'}: cannot write a plan there (Not a directory); "
                                     "give a directory you can write, such as build/<stack> (the default)")
    assert time.monotonic() - started < 60  # not after a whole plan (a loose bound: only that it stops early)


def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """Ctrl-C half a second in (importing or reading the stack; a plan takes seconds): exit 130, one line, and the
    previous plan untouched. The planning and writing phases are interrupted deterministically above and below."""
    after_s = 0.5
    before = _previous(tmp_path)
    proc = subprocess.Popen([str(CLI), "plan", "--stack", "dev", "--out", str(tmp_path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.fail(f"the plan ended within {after_s} s, before the interrupt: nothing was tested")
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    assert stderr.strip().splitlines()[-1].startswith("interrupted"), stderr
    after = _files(tmp_path)
    assert after == before or ("plan.json" in after and '"earlier"' not in after["plan.json"])


def test_ctrl_c_while_the_program_runs_under_the_mocks_ends_the_process_at_once() -> None:
    """Pulumi's runtime swallows a KeyboardInterrupt in one of its tasks and its loop then waits forever: the plan
    exits 130 from the signal handler instead (nothing is written while planning)."""
    code = ("import os, signal\n"
            "from scripts.offline import plan\n"
            "real = plan.record\n"
            "def record(*args, **kwargs):\n"
            "    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C once the program runs\n"
            "    return real(*args, **kwargs)\n"
            "plan.record = record\n"
            "plan.run_plan('dev')\n"
            "print('planned')\n")
    result = subprocess.run([str(CLI.with_name("python")), "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 130 and "planned" not in result.stdout, result
    assert result.stderr.strip() == "interrupted while planning: nothing was written"
