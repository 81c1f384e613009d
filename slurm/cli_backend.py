"""Job backend on the Slurm command-line tools: works with any Slurm that has `--json` (22.05+)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from slurm.backend import JobClientError, SubmitOptions
from slurm.jobinfo import JobDataError, JobInfo, jobs_from_sacct, jobs_from_squeue

TIMEOUT_S = 60


def execute(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a Slurm tool; a missing tool, a hang or a non-zero exit becomes a JobClientError."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except FileNotFoundError as exc:
        raise JobClientError(f"`{argv[0]}` not found: Slurm's client tools are not installed here") from exc
    except subprocess.TimeoutExpired as exc:
        raise JobClientError(f"`{' '.join(argv)}` did not answer within {TIMEOUT_S} s") from exc
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        raise JobClientError(f"`{' '.join(argv)}` failed: {message}")
    return result


def run(argv: list[str]) -> str:
    return execute(argv).stdout


def run_json(argv: list[str]) -> Any:
    output = run(argv)
    try:
        return json.loads(output)
    except json.JSONDecodeError as exc:
        raise JobClientError(f"`{' '.join(argv)}` did not print JSON: {output[:200]!r}") from exc


def parse_parsable(output: str) -> int:
    """`sbatch --parsable` prints ``jobid`` or ``jobid;cluster``."""
    first = output.strip().split(";", 1)[0]
    if not first.isdigit():
        raise JobClientError(f"unexpected sbatch output {output.strip()!r}")
    return int(first)


class CliBackend:
    name = "cli"

    def submit(self, script: Path, options: SubmitOptions) -> int:
        return parse_parsable(run(["sbatch", "--parsable", *options.sbatch_args(), str(script)]))

    def queue(self) -> list[JobInfo]:
        # 22.05 ignores -j/-t together with --json, so always take everything and let callers filter.
        try:
            return jobs_from_squeue(run_json(["squeue", "--json"]))
        except JobDataError as exc:
            raise JobClientError(f"cannot read squeue --json: {exc}") from exc

    def accounting(self, job_ids: Iterable[int]) -> list[JobInfo]:
        ids = ",".join(str(job_id) for job_id in job_ids)
        if not ids:
            return []
        try:
            return jobs_from_sacct(run_json(["sacct", "--json", "--duplicates", f"--jobs={ids}"]))
        except JobDataError as exc:
            raise JobClientError(f"cannot read sacct --json: {exc}") from exc

    def cancel(self, job_id: int) -> None:
        # scancel exits 0 even for an unknown job id; only --verbose prints the error.
        result = execute(["scancel", "--verbose", str(job_id)])
        failures = [line for line in result.stderr.splitlines() if "error:" in line]
        if failures:
            raise JobClientError(f"cancel {job_id} failed: {failures[0].split('error:', 1)[1].strip()}")

    def requeue(self, job_id: int) -> None:
        run(["scontrol", "requeue", str(job_id)])
