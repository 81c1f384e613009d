"""A declared user on a twin's login pod, doing what the README tells a researcher to do; and the waits the
journey tests share. Every failure names the stack, the partition, the job and what stopped it."""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.twin.cluster import Twin
from tests.jobs.runs import log_events as events  # noqa: F401 (the journey modules read logs with it)

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "jobs" / "train.py"
SLURM_EKS = REPO / ".venv" / "bin" / "slurm-eks"
# A login shell's PATH on the image (sbatch & co. in /usr/bin; the training image's torchrun in /usr/local/bin).
LOGIN_PATH = "/usr/local/bin:/usr/bin:/bin"
# From sbatch to RUNNING from zero nodes: the lifecycle controller counts demand every 15 s, Prometheus scrapes every
# 3 s, KEDA polls every 30 s, the HPA syncs every 15 s, Karpenter's launch (scaling.TWIN_LAUNCH_DELAY_S), then the
# slurmd pod starts and registers: about 90 s at worst on an idle machine, more while torch ranks load it.
START_BOUND_S = 300
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED")


@dataclass
class Job:
    id: int
    where: str  # "<stack>/<partition> job <id>": for messages


@dataclass
class Researcher:
    twin: Twin
    user: str
    stack: str
    stacks_dir: Path = REPO / "stacks"

    @property
    def home(self) -> str:
        return f"/shared/home/{self.user}"

    def sh(self, script: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`script` in bash on the login pod, as this user, from their home."""
        env = {"PATH": LOGIN_PATH, "HOME": self.home, "USER": self.user, "LOGNAME": self.user}
        return self.twin.pod("login").started.exec(["bash", "-c", f"cd {shlex.quote(self.home)} && {script}"],
                                                   user=self.user, env=env, timeout=timeout, check=check)

    def render(self, partition: str, flags: list[str], entry: list[str], name: str) -> str:
        """`slurm-eks job render` into <home>/<name>.sbatch; returns that path."""
        path = f"{self.home}/{name}.sbatch"
        command = [str(SLURM_EKS), "job", "render", "--stack", self.stack, "--partition", partition,
                   "--stacks-dir", str(self.stacks_dir), "--job-name", name, *flags, "--", *entry]
        self.sh(f"{shlex.join(command)} > {shlex.quote(path)}")
        return path

    def sbatch(self, script: str, partition: str, *options: str) -> Job:
        result = self.sh(shlex.join(["sbatch", "--parsable", *options, script]), check=False)
        if result.returncode != 0:
            pytest.fail(f"{self.stack}/{partition}: sbatch {script} was refused: {result.stderr.strip()}",
                        pytrace=False)
        out = result.stdout.strip()
        job_id = int(out.split(";")[0])
        return Job(job_id, f"{self.stack}/{partition} job {job_id}")


def admin(twin: Twin, script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """As root on the login pod (an operator)."""
    return twin.pod("login").started.exec(["bash", "-c", script], env={"PATH": LOGIN_PATH}, timeout=timeout)


def job_state(twin: Twin, job: Job) -> tuple[str, str, str]:
    """(state, reason, node list) as `squeue` shows them (finished jobs until MinJobAge)."""
    out = admin(twin, f"squeue -h -t all -j {job.id} -o '%T|%r|%N'").stdout.strip()
    if not out:
        return "", "", ""
    state, reason, nodes = out.split("|")
    return state, reason, nodes


def wait_for(twin: Twin, job: Job, states: tuple[str, ...], timeout_s: float, log: Path | None = None,
             reason: str | None = None) -> tuple[str, str, str]:
    """Until the job is in one of `states` (and, if given, shows `reason`); fail naming what it shows."""
    deadline = time.monotonic() + timeout_s
    seen = ("", "", "")
    while time.monotonic() < deadline:
        seen = job_state(twin, job)
        if seen[0] in states and (reason is None or seen[1] == reason):
            return seen
        if seen[0] in TERMINAL and seen[0] not in states:
            break
        time.sleep(1)
    tail = log.read_text()[-3000:] if log is not None and log.exists() else "(no log)"
    pytest.fail(f"{job.where}: not {'/'.join(states)}{' (' + reason + ')' if reason else ''} within "
                f"{timeout_s:.0f} s; it is {seen[0] or 'gone'} ({seen[1]}) on {seen[2] or 'no nodes'}"
                f"{cluster_story(twin)}\n{tail}", pytrace=False)


def cluster_story(twin: Twin) -> str:
    """What the nodes say: each drained or down node with its partition and reason (a health check's names the
    check and what it missed), and the controllers' last steps."""
    drained = admin(twin, "sinfo -h -R -N -o '%P %N %T: %E' || true", timeout=30).stdout.strip()
    lines = [f"\n  partition {line}" for line in drained.splitlines()]
    if not twin.platform_running:
        lines.append("\n  the twin's controllers and probes are not running (Twin.stop_platform was called)")
    if twin.controllers is not None:
        lines += [f"\n  {e.nodeset}: {e.what} {e.detail}" for e in twin.controllers.events[-8:]]
        lines += [f"\n  controller error: {error}" for error in twin.controllers.errors[-3:]]
    lines += [f"\n  platform error: {error}" for error in twin.platform_errors[-3:]]
    return "".join(lines)
