"""`slurm-eks plan` never leaves a half-written plan: an interruption keeps the previous plan or leaves none (never a
plan.json beside another plan's manifests, which `diff` would trust), a directory it cannot write is one line before
the plan's seconds are spent, and Ctrl-C is one line and exit 130, never a traceback."""

from __future__ import annotations

import os
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


def test_ctrl_c_while_the_command_imports_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """Ctrl-C while the command's modules are imported (a second or more on a busy machine): exit 130, one line,
    the previous plan untouched. The planning and writing phases are interrupted below and above."""
    before = _previous(tmp_path)
    code = ("import os, signal, sys\n"
            f"sys.argv = ['slurm-eks', 'plan', '--stack', 'dev', '--out', {str(tmp_path)!r}]\n"
            "class CtrlC:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'scripts.cli.main':\n"
            "            os.kill(os.getpid(), signal.SIGINT)\n"
            "        return None\n"
            "sys.meta_path.insert(0, CtrlC())\n"
            "from scripts.cli.entry import main\n"
            "main()\n")
    result = subprocess.run([str(CLI.with_name("python")), "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 130 and result.stderr.strip() == "interrupted", result
    assert _files(tmp_path) == before


def test_ctrl_c_while_the_program_runs_under_the_mocks_ends_the_process(tmp_path: Path) -> None:
    """Ctrl-C while Pulumi registers resources: exit 130 with one line, whichever way the interrupt unwinds, and no
    plan written."""
    code = ("import os, signal, sys\n"
            f"sys.argv = ['slurm-eks', 'plan', '--stack', 'dev', '--out', {str(tmp_path)!r}]\n"
            "from scripts.offline import mocks\n"
            "real, seen = mocks.RealisticMocks.new_resource, []\n"
            "def new_resource(self, args):\n"
            "    seen.append(args)\n"
            "    if len(seen) == 20:\n"
            "        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while Pulumi registers resources\n"
            "    return real(self, args)\n"
            "mocks.RealisticMocks.new_resource = new_resource\n"
            "from scripts.cli.entry import main\n"
            "main()\n")
    # The plan must be made, not read from the plan cache, or nothing registers resources to interrupt.
    result = subprocess.run([str(CLI.with_name("python")), "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "SLURM_EKS_PLAN_CACHE": "0"})
    assert result.returncode == 130 and "Traceback" not in result.stderr, result
    assert result.stderr.strip().splitlines()[-1].startswith("interrupted")
    assert not (tmp_path / "plan.json").exists()


def test_a_swallowed_interrupt_still_ends_the_process_after_the_grace() -> None:
    """What Pulumi's runtime does to a KeyboardInterrupt in one of its tasks (catch it, then wait forever): the entry
    point's handler ends the process INTERRUPT_GRACE_S later, exit 130, one line."""
    code = ("import os, signal, time\n"
            "from scripts.cli import entry\n"
            "signal.signal(signal.SIGINT, entry._interrupted)\n"
            "try:\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    time.sleep(1)\n"
            "except KeyboardInterrupt:\n"
            "    pass  # swallowed\n"
            "time.sleep(60)\n"
            "print('still running')\n")
    started = time.monotonic()
    result = subprocess.run([str(CLI.with_name("python")), "-c", code], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 130 and result.stderr.strip() == "interrupted" and "still" not in result.stdout
    assert time.monotonic() - started < 60


@pytest.mark.skipif(os.geteuid() != 0, reason="the premise: /proc passes root's write check (CI runs as root)")
def test_an_os_error_inside_a_command_is_one_line_naming_the_file() -> None:
    """/proc looks writable to root, so the early check lets it through; creating the directory there fails: the
    entry point reports the OS error in one line, exit 2, no traceback."""
    result = run("plan", "--stack", "dev", "--out", "/proc/slurm-eks-plans")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: /proc/slurm-eks-plans: ")
    assert result.stderr.strip().splitlines()[-1].endswith("; check the path and its permissions, then run again")
