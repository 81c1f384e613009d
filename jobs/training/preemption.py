"""Stop requests (SIGUSR2, SIGTERM, a stop file) turned into one decision that all ranks share, and the
marker files that tell a job script how the run ended."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from types import FrameType

from jobs.training.distributed import DistEnv, all_ranks_max

STOP_SIGNALS = (signal.SIGUSR2, signal.SIGTERM)
PREEMPTED_MARKER = "PREEMPTED"
DONE_MARKER = "DONE"


class StopRequest:
    """Records stop signals (the handler only sets a flag: the step in flight finishes) and polls the
    stop file; `agreed()` is collective, so every rank stops after the same step."""

    def __init__(self, stop_file: Path | None, poll_file: bool) -> None:
        self.stop_file = stop_file
        self.poll_file = poll_file  # one rank per node polls: a stat per step per node, not per GPU
        self.received: set[signal.Signals] = set()
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.received.add(signal.Signals(signum))

    def agreed(self, env: DistEnv) -> list[str]:
        """Reasons any rank has to stop (empty: keep going). Collective: call it on every rank, at the same
        steps (jobs/training/cadence.py says which)."""
        return self.agree(env)[0]

    def agree(self, env: DistEnv, elapsed_ms: int = 0) -> tuple[list[str], int]:
        """`agreed`, with `elapsed_ms` (this rank's time since the previous agreement) carried in the same
        all-reduce: the reasons, and the slowest rank's milliseconds (StopCadence.agreed takes them)."""
        local = [int(sig in self.received) for sig in STOP_SIGNALS]
        local.append(int(self.poll_file and self.stop_file is not None and self.stop_file.exists()))
        local.append(elapsed_ms)
        *hits, slowest_ms = all_ranks_max(local, env)
        reasons = [sig.name for sig in STOP_SIGNALS] + ["stop-file"]
        return [reason for reason, hit in zip(reasons, hits, strict=True) if hit], slowest_ms


def write_marker(root: Path, name: str, payload: dict[str, object]) -> Path:
    """Atomically write <root>/<name> as JSON (temp file + rename: readers never see half of it)."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{name}.tmp"
    tmp.write_text(json.dumps(payload) + "\n")
    os.replace(tmp, root / name)
    return root / name


def clear_stale(root: Path | None, stop_file: Path | None) -> None:
    """At start, drop what the previous attempt left: its end markers and the stop file that ended it.

    A stop file with no end marker at least as new is a request made for this attempt, not a leftover: the job
    script's USR2 trap may touch it while the ranks still start (importing torch, loading a large model), and
    deleting it then would lose the time-limit warning and let the job run into its limit uncheckpointed. (The job
    script itself removes the previous run's stop file before it launches torchrun.)"""
    ended = [root / PREEMPTED_MARKER, root / DONE_MARKER] if root is not None else []
    ended_at = max((path.stat().st_mtime for path in ended if path.exists()), default=None)
    if stop_file is not None and stop_file.exists() and ended_at is not None \
            and stop_file.stat().st_mtime <= ended_at:
        stop_file.unlink(missing_ok=True)
    for path in ended:
        path.unlink(missing_ok=True)
