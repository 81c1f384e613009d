"""One typed view of a Slurm job from `squeue --json` / `sacct --json` of any Slurm we meet.

Slurm 22.05 (openapi v0.0.38) prints states as strings, times as plain integers and squeue's exit code
as a raw wait status. Slurm 24.x/25.x (data_parser v0.0.41-0.0.44) print states as lists
(``["PENDING", "REQUEUED"]``), many numbers as ``{"set": true, "infinite": false, "number": N}`` and
exit codes as ``{"status": [...], "return_code": ..., "signal": {"id": ..., "name": ...}}``. The
normalisers below accept both shapes field by field, so a mixed or newer output still parses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from slurm.agent.health.slurm_json import number

TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
DEFAULT_OUTPUT = "slurm-%j.out"
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"


class JobDataError(ValueError):
    """The JSON is not a squeue/sacct document we understand."""


@dataclass(frozen=True)
class JobInfo:
    job_id: int
    name: str
    user: str | None
    state: str
    reason: str | None
    partition: str | None
    nodes: str | None
    exit_code: int | None
    exit_signal: int | None
    restart_count: int
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    stdout: str | None
    work_dir: str | None
    source: str

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_STATES


def state_name(value: Any) -> str:
    """``"RUNNING"`` (22.05) or ``["RUNNING", ...flags]`` (24.x+): the base state comes first."""
    if isinstance(value, list):
        value = value[0] if value else None
    if not isinstance(value, str) or not value:
        raise JobDataError(f"unrecognised job state {value!r}")
    return value.split()[0].upper()


def timestamp(value: Any) -> datetime | None:
    seconds = number(value)
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def _text(value: Any, *absent: str) -> str | None:
    """A string field, with Slurm's ways of saying "nothing" ('', 'None', 'None assigned') as None."""
    if not isinstance(value, str) or value in ("", *absent):
        return None
    return value


def exit_status(value: Any) -> tuple[int | None, int | None]:
    """(return code, signal) from a raw wait status (22.05 squeue) or an exit-code object."""
    if isinstance(value, Mapping):
        signal = value.get("signal")
        signal_id = None
        if isinstance(signal, Mapping):
            signal_id = number(signal.get("id", signal.get("signal_id")))
        return number(value.get("return_code")), signal_id or None
    raw = number(value)
    if raw is None:
        return None, None
    return (raw >> 8) & 0xFF, (raw & 0x7F) or None


_PATTERN = re.compile(r"%(\d*)([%AajJNux])")
_HOSTLIST_HEAD = re.compile(r"([^,\[]+)(?:\[(\d+))?")


def _first_host(nodes: str) -> str:
    """First host of a hostlist: ``gpu-[3-4,7],cpu-1`` -> ``gpu-3`` (what %N expands to)."""
    match = _HOSTLIST_HEAD.match(nodes)
    return (match.group(1) + (match.group(2) or "")) if match else ""


def expand_output_path(
    pattern: str | None,
    *,
    job_id: int,
    name: str,
    user: str | None,
    nodes: str | None,
    work_dir: str | None,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
) -> str:
    """The file a job's stdout goes to: sbatch's filename pattern expanded, relative to the work dir."""
    is_array = array_task_id is not None and bool(array_job_id)
    pattern = pattern or (DEFAULT_ARRAY_OUTPUT if is_array else DEFAULT_OUTPUT)
    first_node = _first_host(nodes) if nodes else ""
    values = {
        "A": str(array_job_id if is_array else job_id),
        "a": str(array_task_id) if is_array else "4294967294",
        "j": str(job_id),
        "J": str(job_id),
        "N": first_node,
        "u": user or "",
        "x": name,
    }

    def substitute(match: re.Match[str]) -> str:
        width, key = match.groups()
        if key == "%":
            return "%"
        value = values[key]
        return value.zfill(int(width)) if width and value.isdigit() else value

    path = _PATTERN.sub(substitute, pattern)
    if work_dir and not PurePosixPath(path).is_absolute():
        return str(PurePosixPath(work_dir) / path)
    return path


def _jobs(document: Any) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping) or not isinstance(document.get("jobs"), list):
        raise JobDataError("expected a JSON object with a 'jobs' list (output of squeue/sacct --json)")
    return document["jobs"]


def from_squeue_job(job: Mapping[str, Any]) -> JobInfo:
    try:
        job_id = int(job["job_id"])
        state = state_name(job["job_state"])
    except (KeyError, TypeError, ValueError) as exc:
        raise JobDataError(f"squeue job without a usable job_id/job_state: {exc}") from exc
    name = job.get("name") or ""
    user = _text(job.get("user_name"))
    nodes = _text(job.get("nodes"))
    work_dir = _text(job.get("current_working_directory"))
    exit_code, signal = exit_status(job.get("exit_code"))
    finished = state in TERMINAL_STATES
    return JobInfo(
        job_id=job_id,
        name=name,
        user=user,
        state=state,
        reason=_text(job.get("state_reason"), "None"),
        partition=_text(job.get("partition")),
        nodes=nodes,
        exit_code=exit_code if finished else None,
        exit_signal=signal if finished else None,
        restart_count=number(job.get("restart_cnt")) or 0,
        submit_time=timestamp(job.get("submit_time")),
        start_time=timestamp(job.get("start_time")),
        # For live jobs squeue reports the *expected* end (start + time limit).
        end_time=timestamp(job.get("end_time")) if finished else None,
        stdout=expand_output_path(
            _text(job.get("standard_output")),
            job_id=job_id,
            name=name,
            user=user,
            nodes=nodes,
            work_dir=work_dir,
            array_job_id=number(job.get("array_job_id")),
            array_task_id=number(job.get("array_task_id")),
        ),
        work_dir=work_dir,
        source="squeue",
    )


def jobs_from_squeue(document: Any) -> list[JobInfo]:
    return [from_squeue_job(job) for job in _jobs(document)]


def from_sacct_records(records: list[Mapping[str, Any]]) -> JobInfo:
    """One job from its accounting records: every requeue leaves one more record with the same id."""
    job = max(enumerate(records), key=lambda pair: (number(pair[1].get("time", {}).get("submission")) or 0, pair[0]))[1]
    try:
        job_id = int(job["job_id"])
        state_field = job["state"]
        state = state_name(state_field["current"] if isinstance(state_field, Mapping) else state_field)
    except (KeyError, TypeError, ValueError) as exc:
        raise JobDataError(f"sacct job without a usable job_id/state: {exc}") from exc
    times = job.get("time") or {}
    exit_code, signal = exit_status(job.get("exit_code"))
    if state == "FAILED" and exit_code == 0 and not signal:
        # 22.05's sacct --json reports SUCCESS/0 for failed jobs (sacct -o ExitCode says 3:0): unknown.
        exit_code = None
    name = job.get("name") or ""
    user = _text(job.get("user"))
    nodes = _text(job.get("nodes"), "None assigned")
    work_dir = _text(job.get("working_directory"))
    return JobInfo(
        job_id=job_id,
        name=name,
        user=user,
        state=state,
        reason=_text(state_field.get("reason"), "None") if isinstance(state_field, Mapping) else None,
        partition=_text(job.get("partition")),
        nodes=nodes,
        exit_code=exit_code,
        exit_signal=signal,
        restart_count=len(records) - 1,
        submit_time=timestamp(times.get("submission")),
        start_time=timestamp(times.get("start")),
        end_time=timestamp(times.get("end")),
        # sacct prints the stdout path from 24.05 on, next to its pattern, as Slurm expanded it: final, since
        # expanding it again would undo its %% and \ escapes. 22.05 leaves it unknown.
        stdout=_text(job.get("stdout_expanded")),
        work_dir=work_dir,
        source="sacct",
    )


def jobs_from_sacct(document: Any) -> list[JobInfo]:
    by_id: dict[int, list[Mapping[str, Any]]] = {}
    for record in _jobs(document):
        try:
            by_id.setdefault(int(record["job_id"]), []).append(record)
        except (KeyError, TypeError, ValueError) as exc:
            raise JobDataError(f"sacct record without a usable job_id: {exc}") from exc
    return [from_sacct_records(records) for records in by_id.values()]
