"""jobs/train.py under real torchrun (2 CPU workers, gloo): resume is bit-for-bit, torn checkpoints are
ignored, preemption by stop file or signal checkpoints and says so, a killed worker is survived."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import require_module
from tests.jobs import runs
from tests.jobs.runs import Run, complete_steps, once_at_step, stop_file, worker_pids

require_module("torch", "pip install -e '.[jobs]': the training tests need it")

pytestmark = pytest.mark.torch


# FSDP2 over gloo runs ~6x slower per step than DDP on CPU, so it gets a shorter run.
MODES = {"ddp": ([], 40, 10), "fsdp": (["--fsdp"], 12, 4)}  # extra flags, steps, checkpoint interval


def torchrun(
    ckpt: Path,
    mode: str = "ddp",
    on_event: Callable[[dict[str, object], subprocess.Popen[str]], None] | None = None,
    launcher_args: tuple[str, ...] = (),
    python: str | None = None,
) -> Run:
    """Two CPU workers over gloo in one of MODES, on the images' torch unless `python` is given."""
    extra, steps, every = MODES[mode]
    flags = [*extra, "--steps", str(steps), "--checkpoint-every", str(every)]
    return runs.torchrun(ckpt, flags, on_event=on_event, launcher_args=launcher_args, python=python)


@cache
def _reference(mode: str, root: Path) -> tuple[str, Path]:
    ckpt = root / f"reference-{mode}"
    run = torchrun(ckpt, mode)
    assert run.rc == 0, run.stderr[-3000:]
    return str(run.last("done")["params_sha256"]), ckpt


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[str, Path]]:
    """(params hash, checkpoint dir) of an uninterrupted run per mode, computed once per module."""
    root = tmp_path_factory.mktemp("reference")
    return lambda mode: _reference(mode, root)


def test_uninterrupted_run_keeps_latest_checkpoints(reference: Callable[[str], tuple[str, Path]]) -> None:
    digest, ckpt = reference("ddp")
    _, steps, every = MODES["ddp"]
    assert len(digest) == 64
    assert sorted(p.name for p in ckpt.iterdir() if p.name.startswith("step-")) == [
        f"step-{steps - every}",
        f"step-{steps}",
    ]
    assert complete_steps(ckpt) == [steps - every, steps]
    assert json.loads((ckpt / "DONE").read_text()) == {"step": steps, "params_sha256": digest}
    assert not (ckpt / "PREEMPTED").exists()


def touch_stop_file(ckpt: Path) -> Callable[[subprocess.Popen[str]], None]:
    return lambda _: stop_file(ckpt).touch()


def usr2_to_rank_1(ckpt: Path) -> Callable[[subprocess.Popen[str]], None]:
    return lambda proc: os.kill(worker_pids(proc.pid)[1], signal.SIGUSR2)


@pytest.mark.parametrize(
    ("mode", "trigger", "reason"),
    [("ddp", touch_stop_file, "stop-file"), ("fsdp", usr2_to_rank_1, "SIGUSR2")],
    ids=["ddp-stop-file", "fsdp2-sigusr2-to-one-worker"],
)
def test_preempted_then_resumed_is_bit_for_bit(
    mode: str,
    trigger: Callable[[Path], Callable[[subprocess.Popen[str]], None]],
    reason: str,
    tmp_path: Path,
    reference: Callable[[str], tuple[str, Path]],
) -> None:
    ckpt = tmp_path / "ckpt"
    stopped = torchrun(ckpt, mode, once_at_step(2, trigger(ckpt)))
    _, steps, _ = MODES[mode]
    preempted = stopped.last("preempted")
    stop_step = int(preempted["step"])  # type: ignore[call-overload]
    # A signal seen by rank 1 alone still stops every rank after the same step (rank 0 prints it).
    assert stopped.rc == 0 and preempted["reasons"] == [reason]
    assert 2 < stop_step < steps and stop_step in complete_steps(ckpt)
    marker = json.loads((ckpt / "PREEMPTED").read_text())
    assert marker == {"step": stop_step, "reasons": [reason], "checkpoint": str(ckpt / f"step-{stop_step}")}
    assert not any(e.get("event") == "done" for e in stopped.events)

    resumed = torchrun(ckpt, mode)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert resumed.last("resumed")["step"] == stop_step
    assert resumed.last("resumed")["rng_restored"] is True
    assert resumed.last("done")["params_sha256"] == reference(mode)[0]
    assert not (ckpt / "PREEMPTED").exists() and not stop_file(ckpt).exists()


def test_torn_checkpoint_is_ignored(tmp_path: Path, reference: Callable[[str], tuple[str, Path]]) -> None:
    digest, finished = reference("ddp")
    _, steps, every = MODES["ddp"]
    ckpt = tmp_path / "ckpt"
    shutil.copytree(finished, ckpt)
    newest = ckpt / f"step-{steps}"
    (newest / ".metadata").unlink()  # killed before the commit: shards written, metadata not
    shard = next(newest.glob("*.distcp"))
    shard.write_bytes(shard.read_bytes()[:100])

    run = torchrun(ckpt)
    assert run.rc == 0, run.stderr[-3000:]
    assert run.last("resumed")["step"] == steps - every
    assert run.last("done")["params_sha256"] == digest
    assert complete_steps(ckpt) == [steps - every, steps]  # the torn one was rewritten


@pytest.mark.parametrize(
    ("sig", "launcher_args"),
    [
        (signal.SIGTERM, ()),  # forwarded by default (Slurm's time limit, scancel)
        (signal.SIGUSR2, ("--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2",)),
    ],
    ids=["SIGTERM", "SIGUSR2-handled"],
)
def test_signal_to_torchrun_is_forwarded_and_checkpointed(
    sig: signal.Signals, launcher_args: tuple[str, ...], tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    # --signals-to-handle is newer than the default image's torch 2.9 (its torchrun exits 2, "unrecognized
    # arguments"): that case runs on the main venv's torch 2.13, the PyTorch 2.13 DLC's.
    python = sys.executable if launcher_args else None
    run = torchrun(ckpt, on_event=once_at_step(2, lambda p: p.send_signal(sig)), launcher_args=launcher_args,
                   python=python)
    preempted = run.last("preempted")
    assert preempted["reasons"] == [sig.name]
    assert int(preempted["step"]) in complete_steps(ckpt)  # type: ignore[call-overload]
    assert (ckpt / "PREEMPTED").exists()
    # torchrun re-raises the signal as an error after its workers exited 0: exit 1, hence the marker file.
    assert run.rc == 1


def test_killed_worker_is_restarted_and_resumes(tmp_path: Path, reference: Callable[[str], tuple[str, Path]]) -> None:
    ckpt = tmp_path / "ckpt"
    _, _, every = MODES["ddp"]
    # Periodic checkpoints are written in the background: kill once the first one is complete on disk.
    kill = once_at_step(every + 3, lambda p: os.kill(worker_pids(p.pid)[1], signal.SIGKILL),
                        ready=lambda: every in complete_steps(ckpt))  # fmt: skip
    run = torchrun(ckpt, on_event=kill, launcher_args=("--max-restarts=1",))
    assert run.rc == 0, run.stderr[-3000:]
    assert run.starts == 2
    assert int(run.last("resumed")["step"]) >= every  # type: ignore[call-overload]
    assert run.last("done")["params_sha256"] == reference("ddp")[0]


def test_time_based_stop_checks_agree_on_every_rank_and_change_nothing(
        reference: Callable[[str], tuple[str, Path]], tmp_path: Path) -> None:
    # Without --stop-check-every the ranks pick the next agreement from the slowest rank's time, carried in
    # the agreement itself (jobs/training/cadence.py): every rank must call the collective at the same steps
    # (else gloo would hang or mismatch) and the training is the same, bit for bit.
    ckpt = tmp_path / "ckpt"
    extra, steps, every = MODES["ddp"]
    at = runs.TINY.index("--stop-check-every")
    tiny = [*runs.TINY[:at], *runs.TINY[at + 2:]]  # the flag and its value out: the default, time-based
    cmd = [*runs.torchrun_command(), "--standalone", "--nproc_per_node=2", str(runs.TRAIN),
           *tiny, *extra, "--steps", str(steps), "--checkpoint-every", str(every), "--checkpoint-dir", str(ckpt),
           "--stop-file", str(stop_file(ckpt))]  # fmt: skip
    run = runs.launch(cmd)
    assert run.rc == 0, run.stderr[-3000:]
    assert run.last("done")["params_sha256"] == reference("ddp")[0]


def test_a_stop_request_is_taken_at_the_next_stop_check(tmp_path: Path) -> None:
    # --stop-check-every 4: the ranks agree only every 4th step (no collective in between), so a stop file
    # seen after step 2 ends the run after step 4, with its checkpoint.
    ckpt = tmp_path / "ckpt"
    extra, steps, every = MODES["ddp"]
    flags = [*extra, "--steps", str(steps), "--checkpoint-every", str(every), "--stop-check-every", "4"]
    run = runs.torchrun(ckpt, flags, on_event=once_at_step(2, lambda _: stop_file(ckpt).touch()))
    step = int(run.last("preempted")["step"])  # type: ignore[call-overload]
    assert step % 4 == 0 and step in complete_steps(ckpt)
