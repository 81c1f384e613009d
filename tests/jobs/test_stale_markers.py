"""What a new attempt clears at start (jobs/training/preemption.py clear_stale): the previous attempt's end markers
and the stop file that ended it, never a stop requested since (the time-limit warning may come while ranks start)."""

from __future__ import annotations

import os
from pathlib import Path

from jobs.training.preemption import DONE_MARKER, PREEMPTED_MARKER, clear_stale


def test_the_stop_file_that_ended_the_last_attempt_is_dropped_with_its_marker(tmp_path: Path) -> None:
    stop = tmp_path / "STOP"
    stop.touch()
    os.utime(stop, (1000, 1000))
    (tmp_path / PREEMPTED_MARKER).write_text("{}")
    os.utime(tmp_path / PREEMPTED_MARKER, (1001, 1001))
    clear_stale(tmp_path, stop)
    assert not stop.exists() and not (tmp_path / PREEMPTED_MARKER).exists()


def test_a_stop_requested_while_the_ranks_start_is_kept(tmp_path: Path) -> None:
    """The USR2 trap touched STOP after the job script cleared the last run's files: no end marker is newer."""
    stop = tmp_path / "STOP"
    stop.touch()
    clear_stale(tmp_path, stop)
    assert stop.exists()
    (tmp_path / DONE_MARKER).write_text("{}")
    os.utime(tmp_path / DONE_MARKER, (1000, 1000))  # an older attempt's end: the stop is still this attempt's
    clear_stale(tmp_path, stop)
    assert stop.exists() and not (tmp_path / DONE_MARKER).exists()
