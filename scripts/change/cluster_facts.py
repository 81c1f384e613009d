"""What the running cluster says about a change's conditions: the jobs of a partition that would go (running or
waiting), and the ssh sessions a login roll would drop. Read through kubectl (`exec` into the slurmctld and login
pods; their labels: slurm-operator v1.2.1 internal/builder/labels, app.kubernetes.io/name=slurmctld|login), or,
on the twin, through its own daemons (scripts/twin); `judge` turns them into each change's problem."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from components.config.update_policy import Kind
from components.names import SLURM_NAMESPACE
from scripts.change.compare import Change

# One ssh login is one privileged monitor process: `sshd: NAME [priv]` (OpenSSH < 9.8) or `sshd-session: NAME
# [priv]` (9.8 and later split sshd-session out: openssh-portable 9.8 release notes).
_SESSION = re.compile(r"^sshd(-session)?: \S+ \[priv\]$")


@dataclass(frozen=True)
class Job:
    id: int
    user: str
    name: str
    state: str
    partition: str

    def line(self) -> str:
        return f"job {self.id} {self.name!r} of {self.user} ({self.state})"


class ClusterFacts(Protocol):
    def jobs(self, partitions: Sequence[str]) -> list[Job]: ...
    def sessions(self) -> int: ...
    def drain(self, partition: str) -> None: ...


class FactsUnavailable(RuntimeError):
    """The cluster could not be asked (no kubectl, no context, no pod)."""


def drain_command(partition: str) -> str:
    """Slurm's drain of a partition: no new jobs start there, running ones finish (scontrol(1) PartitionName
    State=DRAIN)."""
    return f"scontrol update PartitionName={partition} State=DRAIN"


def parse_squeue(document: str) -> list[Job]:
    """`squeue --json` (Slurm 25.11.7 src/plugins/data_parser/v0.0.44/parsers.c, the job_info fields: job_id,
    name, job_state (JOB_STATE: a list of flags), partition, user_name)."""
    jobs = json.loads(document).get("jobs", [])
    return [Job(int(j["job_id"]), str(j.get("user_name", "")), str(j.get("name", "")),
                ",".join(j["job_state"]) if isinstance(j.get("job_state"), list) else str(j.get("job_state")),
                str(j.get("partition", ""))) for j in jobs]


def count_sessions(ps_output: str) -> int:
    return sum(1 for line in ps_output.splitlines() if _SESSION.match(line.strip()))


class KubectlFacts:
    """The facts through `kubectl` in the deployer's kubeconfig (`--context`)."""

    def __init__(self, context: str | None = None, runner: Callable[[list[str]], str] | None = None) -> None:
        self.context = context
        self._run = runner or _run

    def _kubectl(self, *args: str) -> list[str]:
        return ["kubectl", *(["--context", self.context] if self.context else []), "-n", SLURM_NAMESPACE, *args]

    def _pods(self, name: str) -> list[str]:
        out = self._run(self._kubectl("get", "pods", "-l", f"app.kubernetes.io/name={name}", "-o",
                                      "jsonpath={.items[*].metadata.name}"))
        return out.split()

    def _controller(self) -> str:
        pods = self._pods("slurmctld")
        if not pods:
            raise FactsUnavailable(f"no slurmctld pod in namespace {SLURM_NAMESPACE}")
        return pods[0]

    def jobs(self, partitions: Sequence[str]) -> list[Job]:
        out = self._run(self._kubectl("exec", self._controller(), "-c", "slurmctld", "--", "squeue", "--json",
                                      "--partition", ",".join(partitions)))
        return [j for j in parse_squeue(out) if j.partition in partitions]

    def sessions(self) -> int:
        return sum(count_sessions(self._run(self._kubectl("exec", pod, "-c", "login", "--", "ps", "-eo", "args")))
                   for pod in self._pods("login"))

    def drain(self, partition: str) -> None:
        self._run(self._kubectl("exec", self._controller(), "-c", "slurmctld", "--",
                                *drain_command(partition).split()))


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise FactsUnavailable(f"`{argv[0]}` is not on PATH")
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise FactsUnavailable(f"`{' '.join(argv)}` failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def judge(changes: list[Change], facts: ClusterFacts | None) -> None:
    """Set the problem of each change whose policy needs the running cluster: a partition that goes must have no
    job, a login roll must drop no session. Without facts (offline, or the cluster unreachable) they are refused:
    nobody has looked."""
    for change in changes:
        if change.problem:
            continue
        if change.policy.kind is Kind.PARTITION_IDLE:
            change.problem = _partition_problem(change.name, str(change.key[-1]), facts)
        elif change.policy.kind is Kind.ROLLS_LOGIN:
            change.problem = _session_problem(facts)


def _partition_problem(name: str, partition: str, facts: ClusterFacts | None) -> str:
    try:
        if facts is None:
            raise FactsUnavailable("no cluster to ask")
        jobs = facts.jobs([partition])
    except FactsUnavailable as exc:
        return (f"cannot tell whether partition {partition} is idle ({exc}); its running jobs would be killed. "
                f"Drain it ({drain_command(partition)}) and wait until squeue -p {partition} is empty")
    if not jobs:
        return ""
    listed = "; ".join(j.line() for j in jobs[:10]) + (f"; and {len(jobs) - 10} more" if len(jobs) > 10 else "")
    return (f"{name}: {len(jobs)} job(s) in partition {partition} would be killed or lost: {listed}. Drain it "
            f"({drain_command(partition)}), wait until they end, then run again (or `up --drain`)")


def _session_problem(facts: ClusterFacts | None) -> str:
    try:
        if facts is None:
            raise FactsUnavailable("no cluster to ask")
        count = facts.sessions()
    except FactsUnavailable as exc:
        return f"cannot count the login pods' ssh sessions ({exc}): every one would drop"
    return f"{count} ssh session(s) on the login pods would drop" if count else ""


def drain_and_wait(facts: ClusterFacts, partition: str, timeout_s: float, poll_s: float = 10.0,
                   clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
                   ) -> list[Job]:
    """Drain `partition` and wait until none of its jobs is left, or `timeout_s`; the jobs still there."""
    facts.drain(partition)
    deadline = clock() + timeout_s
    while True:
        left = facts.jobs([partition])
        if not left or clock() >= deadline:
            return left
        sleep(poll_s)
