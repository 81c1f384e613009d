"""How the repair controller and the active checks talk to Slurm: the CLI, in the cluster as a Slurm client on
Slinky's login image (components/lifecycle/node_repair.py) and on the local Slurm in the tests, so both run the same
commands. The Protocol lets the pure tests hand in a fixed cluster.

Standard library only: this runs in the cluster.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any, Protocol

from slurm.agent.health.nodes import SlurmNode, parse_nodes

# SchedMD/slurm slurm-25-11-6-1 src/common/slurm_errno.c: ESLURM_INVALID_JOB_ID's text, what slurmctld answers
# (and squeue prints) for a job it has purged.
_UNKNOWN_JOB = "Invalid job id specified"


class SlurmError(RuntimeError):
    """A Slurm command failed."""


class SlurmAccess(Protocol):
    def nodes(self) -> list[SlurmNode]: ...

    def drain(self, node: str, reason: str) -> None: ...

    def submit(self, script: str, partition: str, nodelist: str, job_name: str) -> int: ...

    def job_state(self, job_id: int) -> str | None:
        """The job's state (first word, e.g. RUNNING, COMPLETED); None when Slurm knows no such job."""
        ...

    def pending_jobs(self) -> dict[str, Any]:
        """`squeue --json` of the pending jobs (slurm/agent/health/demand.py reads it)."""
        ...


class CliSlurm:
    """scontrol / sinfo / sbatch / squeue / sacct on PATH."""

    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(list(argv), input=stdin, capture_output=True, text=True, timeout=self.timeout,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{' '.join(argv)}: {exc}") from None

    def _ok(self, argv: Sequence[str], stdin: str | None = None) -> str:
        done = self._run(argv, stdin)
        if done.returncode != 0:
            raise SlurmError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[:500]}")
        return done.stdout

    def nodes(self) -> list[SlurmNode]:
        done = self._run(["scontrol", "show", "nodes", "--json"])
        if done.returncode == 0:
            return parse_nodes(json.loads(done.stdout))
        # Slurm 22.05's scontrol has no --json ("scontrol: unrecognized option '--json'"); its sinfo --json
        # dumps the nodes (openapi/v0.0.38). 25.11's sinfo --json is a different shape, so only on that refusal.
        if "unrecognized option" in done.stderr:
            return parse_nodes(json.loads(self._ok(["sinfo", "--json"])))
        raise SlurmError(f"scontrol show nodes --json: exit {done.returncode}: {done.stderr.strip()[:500]}")

    def drain(self, node: str, reason: str) -> None:
        # One argv word each: scontrol takes "reason=<text with spaces>" as is (no shell in between).
        self._ok(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"])

    def submit(self, script: str, partition: str, nodelist: str, job_name: str) -> int:
        out = self._ok(["sbatch", "--parsable", f"--partition={partition}", f"--nodelist={nodelist}",
                        f"--job-name={job_name}"], stdin=script)
        # --parsable prints "jobid" or "jobid;cluster" (sbatch(1)).
        return int(out.strip().split(";")[0])

    def pending_jobs(self) -> dict[str, Any]:
        # 25.11's squeue applies --states to its JSON too (src/squeue/print.c squeue_filter_jobs_for_json);
        # demand.py checks each job's state anyway. --array is not needed: a pending array is one record.
        return json.loads(self._ok(["squeue", "--json", "--states=PENDING"]))

    def job_state(self, job_id: int) -> str | None:
        done = self._run(["squeue", "-h", "-j", str(job_id), "-o", "%T"])
        state = done.stdout.strip()
        if done.returncode == 0 and state:
            return state.split()[0]
        if done.returncode != 0 and _UNKNOWN_JOB not in done.stderr:
            raise SlurmError(f"squeue -j {job_id}: exit {done.returncode}: {done.stderr.strip()[:500]}")
        # Gone from slurmctld (MinJobAge passed): accounting has the end state, e.g. "CANCELLED by 0".
        lines = self._ok(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State"]).split()
        return lines[0] if lines else None
