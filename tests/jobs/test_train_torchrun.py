"""jobs/train.py under real torchrun (2 CPU workers, gloo): resume is bit-for-bit, torn checkpoints are
ignored, preemption by stop file or signal checkpoints and says so, a killed worker is survived."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("torch", "pip install -e '.[jobs]': the training tests need it")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "jobs" / "train.py"
# Tiny, but with dropout (RNG state must resume) and gradient accumulation.
TINY = ["--d-model", "32", "--n-heads", "2", "--n-layers", "2", "--seq-len", "16", "--vocab-size", "64",
        "--batch-size", "4", "--dropout", "0.1", "--grad-accum", "2", "--warmup-steps", "5",
        "--log-every", "1", "--keep-checkpoints", "2"]  # fmt: skip
# FSDP2 over gloo runs ~6x slower per step than DDP on CPU, so it gets a shorter run.
MODES = {"ddp": ([], 40, 10), "fsdp": (["--fsdp"], 12, 4)}  # extra flags, steps, checkpoint interval


@dataclass
class Run:
    rc: int
    events: list[dict[str, object]]
    stderr: str
    starts: int = field(init=False)

    def __post_init__(self) -> None:
        self.starts = sum(e.get("event") == "start" for e in self.events)

    def last(self, name: str) -> dict[str, object]:
        matches = [e for e in self.events if e.get("event") == name]
        assert matches, f"no {name!r} event; rc={self.rc}\nevents: {self.events[-5:]}\nstderr: {self.stderr[-3000:]}"
        return matches[-1]


def torchrun(
    ckpt: Path,
    mode: str = "ddp",
    on_event: Callable[[dict[str, object], subprocess.Popen[str]], None] | None = None,
    launcher_args: tuple[str, ...] = (),
    timeout: float = 60,
) -> Run:
    """Run train.py on 2 local workers; `on_event(event, proc)` sees each JSON line as it is printed."""
    extra, steps, every = MODES[mode]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *launcher_args,
           str(TRAIN), *TINY, *extra, "--steps", str(steps), "--checkpoint-every", str(every),
           "--checkpoint-dir", str(ckpt), "--stop-file", str(stop_file(ckpt))]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    # Own session, so a hung run is killed with its workers (torchrun does not take them down on SIGKILL).
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    kill_run = functools.partial(kill_session, proc.pid)
    watchdog = threading.Timer(timeout, kill_run)
    watchdog.start()
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr))  # type: ignore[arg-type]
    reader.start()
    events = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("{"):
                events.append(json.loads(line))
                if on_event is not None:
                    on_event(events[-1], proc)
        rc = proc.wait()
    finally:
        watchdog.cancel()
        kill_run()  # workers orphaned by a signalled torchrun, if any
        reader.join()
    return Run(rc, events, "".join(stderr))


def kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def stop_file(ckpt: Path) -> Path:
    return ckpt.parent / f"{ckpt.name}.stop"


def worker_pids(agent_pid: int) -> dict[int, int]:
    """{global rank: pid} of torchrun's worker processes (its children carrying RANK in their env)."""
    children = Path(f"/proc/{agent_pid}/task/{agent_pid}/children").read_text().split()
    ranks = {}
    for pid in map(int, children):
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        rank = next((int(v[5:]) for v in env if v.startswith(b"RANK=")), None)
        if rank is not None:
            ranks[rank] = pid
    return ranks


def once_at_step(step: int, action: Callable[[subprocess.Popen[str]], None]):
    """An on_event callback that runs `action` the first time a step >= `step` is logged."""
    fired = []

    def on_event(event: dict[str, object], proc: subprocess.Popen[str]) -> None:
        if not fired and "loss" in event and int(event["step"]) >= step:  # type: ignore[call-overload]
            fired.append(event["step"])
            action(proc)

    return on_event


def complete_steps(ckpt: Path) -> list[int]:
    return sorted(int(p.name[5:]) for p in ckpt.glob("step-*") if (p / ".metadata").is_file())


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
    run = torchrun(ckpt, on_event=once_at_step(2, lambda p: p.send_signal(sig)), launcher_args=launcher_args)
    preempted = run.last("preempted")
    assert preempted["reasons"] == [sig.name]
    assert int(preempted["step"]) in complete_steps(ckpt)  # type: ignore[call-overload]
    assert (ckpt / "PREEMPTED").exists()
    # torchrun re-raises the signal as an error after its workers exited 0: exit 1, hence the marker file.
    assert run.rc == 1


def test_killed_worker_is_restarted_and_resumes(tmp_path: Path, reference: Callable[[str], tuple[str, Path]]) -> None:
    ckpt = tmp_path / "ckpt"
    _, _, every = MODES["ddp"]
    kill = once_at_step(every + 3, lambda p: os.kill(worker_pids(p.pid)[1], signal.SIGKILL))
    run = torchrun(ckpt, on_event=kill, launcher_args=("--max-restarts=1",))
    assert run.rc == 0, run.stderr[-3000:]
    assert run.starts == 2
    assert int(run.last("resumed")["step"]) >= every  # type: ignore[call-overload]
    assert run.last("done")["params_sha256"] == reference("ddp")[0]
