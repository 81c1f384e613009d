"""A sandbox that runs a rendered job script under bash with stand-ins for what a Slurm node provides.

Each stand-in is a small Python program on PATH that appends what it was called with (argv and the
environment variables the scripts set) to `<log>/<tool>.jsonl`, then does the least the script needs:

* `srun` drops its own `--flags` and runs the command (so the step's torchrun runs);
* `scontrol show hostnames` prints one node ($FAKE_NODE, default node-0); `scontrol show job -o ID` a
  one-line record whose Command= is $FAKE_COMMAND (`(null)` without it: a script sbatch read from stdin);
  other calls are only recorded (`requeue`);
* `sbatch` keeps the script it reads on stdin in `<log>/sbatch.stdin` and prints a job id ($FAKE_SUBMITTED_ID,
  default 43), as `sbatch --parsable` does;
* `neuron_parallel_compile` runs its command with NEURON_EXTRACT_GRAPHS_ONLY=1, as the real tool does
  (exit $FAKE_COMPILE_RC instead, when set);
* `torchrun` (replaced by a real one with `job_sandbox(root, torchrun=<path>)`) plays the training
  outcome: `DONE` or `PREEMPTED` in $SLURM_EKS_CHECKPOINT_DIR per $FAKE_OUTCOME, exit $FAKE_RC; under
  NEURON_EXTRACT_GRAPHS_ONLY it writes nothing, like the entry point;
* `enroot import -o FILE URI` writes FILE ($FAKE_ENROOT_SLEEP seconds later); with $FAKE_ENROOT_FAIL it
  writes half a file and fails. flock is the real one (util-linux).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from jobs.render import JobTarget

RANK_PREFIX = re.compile(r"^\[\d+\]: ")  # the job scripts prefix each worker line with its rank
# What the job scripts set or must not set, recorded by each stand-in call.
RECORDED_ENV = (
    "SLURM_EKS_DEVICE", "SLURM_EKS_CHECKPOINT_DIR", "NEURON_CC_FLAGS", "NEURON_COMPILE_CACHE_URL",
    "NEURON_EXTRACT_GRAPHS_ONLY", "NEURON_RT_NUM_CORES", "NEURON_RT_VISIBLE_CORES", "FI_PROVIDER",
    "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE", "FI_EFA_USE_HUGE_PAGE", "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
    "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "SLURM_CPUS_PER_TASK",
)
# Inherited settings that would change what the scripts do; the sandbox starts without them.
CLEARED_ENV = (*RECORDED_ENV, "SLURM_EKS_STOP_FILE", "MAX_REQUEUES", "MASTER_ADDR", "MASTER_PORT")

_RECORD = f"""#!{sys.executable}
import json, os, sys
with open(os.path.join(os.environ["STUB_LOG"], os.path.basename(sys.argv[0]) + ".jsonl"), "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:],
                          "env": {{k: os.environ[k] for k in {RECORDED_ENV!r} if k in os.environ}}}}) + "\\n")
"""
STANDINS = {
    "srun": _RECORD + """
command = sys.argv[1:]
while command and command[0].startswith("--"):
    command.pop(0)
os.execvp(command[0], command)
""",
    "scontrol": _RECORD + """
if sys.argv[1:3] == ["show", "hostnames"]:
    print(os.environ.get("FAKE_NODE", "node-0"))
if sys.argv[1:3] == ["show", "job"]:
    print(f"JobId={sys.argv[-1]} JobName=train UserId=u(1000) JobState=RUNNING "
          f"Command={os.environ.get('FAKE_COMMAND', '(null)')} WorkDir=/tmp StdOut={os.environ.get('FAKE_STDOUT', '')}")
""",
    "sbatch": _RECORD + """
with open(os.path.join(os.environ["STUB_LOG"], "sbatch.stdin"), "a") as script:
    script.write(sys.stdin.read())
print(os.environ.get("FAKE_SUBMITTED_ID", "43"))
""",
    "neuron_parallel_compile": _RECORD + """
if os.environ.get("FAKE_COMPILE_RC"):
    sys.exit(int(os.environ["FAKE_COMPILE_RC"]))
os.execvpe(sys.argv[1], sys.argv[1:], {**os.environ, "NEURON_EXTRACT_GRAPHS_ONLY": "1"})
""",
    "torchrun": _RECORD + """
if os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY"):
    sys.exit(0)
outcome = {"done": "DONE", "preempted": "PREEMPTED"}.get(os.environ.get("FAKE_OUTCOME", "done"))
if outcome:
    open(os.path.join(os.environ["SLURM_EKS_CHECKPOINT_DIR"], outcome), "w").close()
sys.exit(int(os.environ.get("FAKE_RC", "0")))
""",
    "enroot": _RECORD + """
import time
_, _, output, uri = sys.argv[1:]
if os.path.exists(output):
    sys.exit(f"[ERROR] File already exists: {output}")
time.sleep(float(os.environ.get("FAKE_ENROOT_SLEEP", "0")))
with open(output, "w") as image:
    image.write(f"squashfs of {uri}" if not os.environ.get("FAKE_ENROOT_FAIL") else "half")
sys.exit(1 if os.environ.get("FAKE_ENROOT_FAIL") else 0)
""",
}


@dataclass(frozen=True)
class JobSandbox:
    """A directory with the stand-ins, their call logs, a checkpoint directory and a stand-in /shared."""

    root: Path
    tools: Path | None = None  # a directory searched right after the stand-ins (a real torchrun's bin)

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def checkpoints(self) -> Path:
        return self.root / "ckpt"

    @property
    def shared(self) -> Path:
        return self.root / "shared"

    @property
    def checkpoint_root(self) -> Path:
        """The stand-in /shared/checkpoints (made like the real one, mode 1777)."""
        return self.shared / "checkpoints"

    @property
    def open_roots(self) -> tuple[Path, ...]:
        """The stand-in /shared directories every user makes their own in (identity-setup.sh: mode 1777)."""
        return tuple(self.shared / name for name in ("checkpoints", "images", "neuron-cache", "logs"))

    def target(self, target: JobTarget, checkpoint_store: bool = False) -> JobTarget:
        """`target` with /shared (images, compile cache, checkpoints) moved into the sandbox. Without the checkpoint
        store unless asked: it needs S3 (tests/checkpoint_store runs it against moto's server)."""
        return dataclasses.replace(target, shared_root=str(self.shared), checkpoint_root=str(self.checkpoint_root),
                                   checkpoint_sync=target.checkpoint_sync if checkpoint_store else None)

    def env(self, unset: tuple[str, ...] = (), **overrides: str) -> dict[str, str]:
        """A two-node allocation of job 42, first run, checkpointing to `checkpoints`; `overrides` add or
        replace variables, `unset` removes them (SLURM_EKS_CHECKPOINT_DIR: the script's own default)."""
        inherited = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
        path = ":".join(str(p) for p in (self.bin, self.tools) if p)
        env = {**inherited, "PATH": f"{path}:{os.environ['PATH']}", "STUB_LOG": str(self.log),
               "SLURM_EKS_CHECKPOINT_DIR": str(self.checkpoints), "SLURM_JOB_ID": "42",
               "SLURM_JOB_NAME": "train", "SLURM_JOB_NODELIST": "node-[0-1]", "SLURM_NNODES": "2",
               "SLURM_RESTART_COUNT": "0", **overrides}
        return {k: v for k, v in env.items() if k not in unset}

    def run(self, script: Path, unset: tuple[str, ...] = (), **overrides: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(script)], cwd=self.root, env=self.env(unset, **overrides),
                              capture_output=True, text=True, timeout=120)

    def calls(self, tool: str) -> list[dict]:
        """Every call of the stand-in `tool` so far: {"argv": [...], "env": {...}}."""
        path = self.log / f"{tool}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def job_sandbox(root: Path, torchrun: Path | None = None) -> JobSandbox:
    """Make the sandbox under `root`; with `torchrun` (e.g. .venv-xla/bin/torchrun) that real torchrun runs
    the steps instead of the stand-in."""
    sandbox = JobSandbox(root, torchrun.parent if torchrun else None)
    for directory in (sandbox.bin, sandbox.log, sandbox.checkpoints, sandbox.shared, *sandbox.open_roots):
        directory.mkdir(parents=True, exist_ok=True)
    for directory in sandbox.open_roots:
        directory.chmod(0o1777)
    for name, body in STANDINS.items():
        if name == "torchrun" and torchrun:
            continue
        (sandbox.bin / name).write_text(body)
        (sandbox.bin / name).chmod(0o755)
    return sandbox


def exported(script: str) -> dict[str, str]:
    """The variables a script exports, as written after `export NAME=`."""
    lines = [line[len("export "):] for line in script.splitlines() if line.startswith("export ")]
    return dict(line.split("=", 1) for line in lines if "=" in line)


def run_script(
    sandbox: JobSandbox, script: Path, env: dict[str, str], stop_after_step: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the job script; with `stop_after_step`, touch its stop file (what its USR2 trap does) once a
    worker logs that step."""
    proc = subprocess.Popen(["bash", str(script)], cwd=sandbox.root, env=sandbox.env(**env, MASTER_PORT=free_port()),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr))  # type: ignore[arg-type]
    reader.start()
    out = []
    timer = threading.Timer(300, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            out.append(line)
            event = parse_event(line)
            if stop_after_step is not None and event and "loss" in event and event["step"] >= stop_after_step:
                (sandbox.checkpoints / "STOP").touch()
                stop_after_step = None
        proc.wait()
    finally:
        timer.cancel()
        reader.join()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(out), "".join(stderr))


def parse_event(line: str) -> dict | None:
    text = RANK_PREFIX.sub("", line.strip(), count=1)
    return json.loads(text) if text.startswith("{") else None


def last_event(stdout: str, name: str) -> dict:
    events = [e for e in map(parse_event, stdout.splitlines()) if e and e.get("event") == name]
    assert events, f"no {name!r} event in:\n{stdout[-3000:]}"
    return events[-1]


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])
