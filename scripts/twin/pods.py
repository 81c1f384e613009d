"""Pods on this machine: start one from a PodRuntimeSpec (scripts/twin/pod_init.py does the inside), run a command
in one of its containers, stop it as Kubernetes does (preStop hook, SIGTERM, grace period, SIGKILL), or kill
it outright (a node that vanished).

A pod's files live under its directory in the twin's state: the spec it was started from, each container's
log, and the host PIDs its containers wrote (status/).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scripts.twin.errors import TwinError
from scripts.twin.network import PodLink

POD_INIT = Path(__file__).resolve().parent / "pod_init.py"
START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Mount:
    source: str  # a path on this machine
    target: str  # where the container sees it
    readonly: bool = False


@dataclass(frozen=True)
class Device:
    path: str  # /dev/...
    major: int
    minor: int


@dataclass(frozen=True)
class Tree:
    """A directory of stand-in files mounted over a /proc or /sys directory (GPU driver files), or, with `merge`,
    added to what that directory holds (the EFA devices' entries in /sys/class)."""

    source: str
    target: str
    merge: bool = False


@dataclass
class Container:
    name: str
    command: list[str]
    env: dict[str, str]
    mounts: list[Mount] = field(default_factory=list)
    workdir: str | None = None
    run_as: tuple[int, int] | None = None  # securityContext runAsUser, runAsGroup; None: root
    log: str = ""  # set by start()


@dataclass
class PodRuntimeSpec:
    name: str
    hostname: str
    lowerdirs: list[str]  # image layers, top first; the machine's root last
    containers: list[Container]
    init_containers: list[Container] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    trees: list[Tree] = field(default_factory=list)
    restart_policy: str = "Always"  # a Job's pod: Never or OnFailure (its end is not a failure)
    hosts_file: str = ""
    layer_dir: str = ""
    status_dir: str = ""


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


class RunningPod:
    """A started pod: its network link, its first process and its directory."""

    def __init__(self, spec: PodRuntimeSpec, link: PodLink, directory: Path,
                 process: subprocess.Popen[bytes]) -> None:
        self.spec = spec
        self.link = link
        self.directory = directory
        self.process = process

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def status_dir(self) -> Path:
        return Path(self.spec.status_dir)

    def log(self, container: str) -> Path:
        return self.directory / "logs" / f"{container}.log"

    def alive(self) -> bool:
        return self.process.poll() is None

    def succeeded(self) -> bool:
        return (self.status_dir / "succeeded").exists()

    def failure(self) -> str | None:
        marker = self.status_dir / "failed"
        return marker.read_text().strip() if marker.exists() else None

    def container_pid(self, container: str | None = None) -> int:
        name = container or self.spec.containers[0].name
        path = self.status_dir / f"{name}.pid"
        if not path.exists():
            raise TwinError(f"pod {self.name}: container {name} has not started (no {path})")
        return int(path.read_text())

    def wait_started(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if (self.status_dir / "started").exists() and all(
                    (self.status_dir / f"{c.name}.pid").exists() for c in self.spec.containers):
                return
            if not self.alive() or self.failure():
                break
            time.sleep(0.1)
        logs = ", ".join(str(self.log(c.name)) for c in [*self.spec.init_containers, *self.spec.containers])
        raise TwinError(f"pod {self.name} did not start: {self.failure() or 'no containers after ' + str(timeout_s)}"
                        f" (see {self.directory / 'pod.log'} and {logs})")

    def exec_argv(self, argv: list[str], container: str | None = None, user: str | None = None,
                  env: dict[str, str] | None = None) -> list[str]:
        """The command line that runs `argv` inside the container (its namespaces and root), as `user`."""
        pid = self.container_pid(container)
        inner = ["env", "-i", *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
        if user:
            inner = ["runuser", "-u", user, "--", *inner]
        return ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--", *inner]

    def exec(self, argv: list[str], container: str | None = None, user: str | None = None,
             env: dict[str, str] | None = None, timeout: float = 60, check: bool = True,
             input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        command = self.exec_argv(argv, container, user, env)
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, input=input_text)
        if check and result.returncode != 0:
            who = f" as {user}" if user else ""
            raise TwinError(f"pod {self.name}: `{' '.join(argv)}`{who} exited {result.returncode}: "
                            f"{(result.stderr or result.stdout).strip()[-2000:]}")
        return result

    def terminate(self, grace_s: float = 15.0) -> None:
        """SIGTERM to the pod (its init forwards it to the containers), SIGKILL after `grace_s`."""
        if not self.alive():
            return
        init = self.status_dir / "init.pid"
        if init.exists():  # unshare(1) does not pass signals on to the pod's first process
            os.kill(int(init.read_text()), signal.SIGTERM)
        else:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Every process of the pod at once, as when its node is gone."""
        _signal_group(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)


def start(spec: PodRuntimeSpec, link: PodLink, directory: Path, hosts_file: Path) -> RunningPod:
    """Start the pod in its network namespace; returns once its first process runs (see wait_started)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "logs").mkdir(exist_ok=True)
    status = directory / "status"
    status.mkdir(exist_ok=True)
    for old in status.iterdir():
        old.unlink()
    spec.hosts_file = str(hosts_file)
    spec.layer_dir = str(directory / "layer")
    spec.status_dir = str(status)
    for container in [*spec.init_containers, *spec.containers]:
        container.log = str(directory / "logs" / f"{container.name}.log")
    spec_file = directory / "pod.json"
    spec_file.write_text(json.dumps(asdict(spec), indent=1))
    command = ["ip", "netns", "exec", link.netns, "unshare", "--mount", "--uts", "--ipc", "--pid", "--fork",
               "--kill-child", "--propagation", "private", sys.executable, str(POD_INIT), str(spec_file)]
    with open(directory / "pod.log", "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    return RunningPod(spec, link, directory, process)
