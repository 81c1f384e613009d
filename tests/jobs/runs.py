"""Running jobs/train.py (or another torchrun entry point: `launch`) under real torchrun from a test: the
JSON events it prints, its exit code and stderr, a watchdog, and the hooks the tests use to stop, signal or
kill it mid-run."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import unavailable

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "jobs" / "train.py"
# The torch the training images ship: the PyTorch DLC and the Neuron DLC of components/slinky/images.py are both
# torch 2.9.0, and `make xla-venv` installs that torch (jobs/requirements-xla.txt, beside torch-xla) into a venv
# of its own. jobs/train.py and the layout scripts run there under torchrun, so the layouts, stop and resume are
# proven on the torch users run (tests/jobs/test_image_torch.py holds the pins together); the main venv's torch
# (2.13.0, the torchtitan recipe's image's) runs the in-process tests.
IMAGE_VENV = Path(os.environ.get("SLURM_EKS_XLA_VENV", REPO / ".venv-xla"))
# Tiny, but with dropout (RNG state must resume) and gradient accumulation.
TINY = ["--d-model", "32", "--n-heads", "2", "--n-layers", "2", "--seq-len", "16", "--vocab-size", "64",
        "--batch-size", "4", "--dropout", "0.1", "--grad-accum", "2", "--warmup-steps", "5",
        "--log-every", "1", "--keep-checkpoints", "2", "--stop-check-every", "1"]  # fmt: skip
# Commit markers of complete checkpoints: DCP's (CUDA/CPU) and the XLA path's (jobs/training/checkpoint.py).
COMMIT_MARKERS = (".metadata", ".complete")


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
    flags: Sequence[str],
    on_event: Callable[[dict[str, object], subprocess.Popen[str]], None] | None = None,
    launcher_args: tuple[str, ...] = (),
    timeout: float = 60,
    python: str | None = None,
    nproc: int = 2,
    env: dict[str, str] | None = None,
) -> Run:
    """Run train.py with TINY + `flags` on `nproc` local workers; `on_event(event, proc)` sees each JSON line
    as it is printed; `python`: the image's torch (image_python()) unless given."""
    cmd = [*torchrun_command(python), "--standalone", f"--nproc_per_node={nproc}", *launcher_args,
           str(TRAIN), *TINY, *flags, "--checkpoint-dir", str(ckpt), "--stop-file", str(stop_file(ckpt))]  # fmt: skip
    return launch(cmd, on_event, timeout, env)


def image_python() -> str:
    """The python of the venv with the images' torch (IMAGE_VENV)."""
    python = IMAGE_VENV / "bin" / "python"
    if not python.is_file():
        unavailable(f"{python} is missing: `make xla-venv` builds the venv with the images' torch (make test does)")
    return str(python)


def torchrun_command(python: str | None = None) -> list[str]:
    """`python -m torch.distributed.run` on the images' torch unless `python` is given."""
    return [python or image_python(), "-m", "torch.distributed.run"]


def launch(
    cmd: Sequence[str],
    on_event: Callable[[dict[str, object], subprocess.Popen[str]], None] | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> Run:
    """Run `cmd` (a torchrun command whose rank 0 prints JSON lines) in its own session, killed with its
    workers after `timeout` seconds."""
    # PYTHONPATH: the images' venv has no editable install of this checkout (jobs/ and tests/ import from it).
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": path, **(env or {})}
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


def once_at_step(step: int, action: Callable[[subprocess.Popen[str]], None], ready: Callable[[], bool] = lambda: True):
    """An on_event callback that runs `action` the first time a step >= `step` is logged once `ready()`."""
    fired = []

    def on_event(event: dict[str, object], proc: subprocess.Popen[str]) -> None:
        if not fired and "loss" in event and int(event["step"]) >= step and ready():  # type: ignore[call-overload]
            fired.append(event["step"])
            action(proc)

    return on_event


def complete_steps(ckpt: Path) -> list[int]:
    return sorted(int(p.name[5:]) for p in ckpt.glob("step-*") if any((p / m).is_file() for m in COMMIT_MARKERS))


RANK_PREFIX = re.compile(r"^\[\d+\]: ")


def log_events(text: str) -> list[dict]:
    """The JSON events in a job log, where the job script prefixes every worker line with its rank (`[0]: `)."""
    out = []
    for raw in text.splitlines():
        line = RANK_PREFIX.sub("", raw, count=1)
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out
