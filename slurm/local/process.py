"""Processes by pidfile: is it ours and alive, start it detached, stop it TERM-then-KILL."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from slurm.local.installation import search_path

STOP_GRACE_S = 15.0


def program(name: str) -> str:
    """Absolute path of a daemon or tool (sbin is often not on PATH)."""
    found = shutil.which(name, path=search_path())
    return found or name


def read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_running(pid: int, executable: str) -> bool:
    """Alive and really `executable` (a reused pid of another program does not count)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rsplit(")", 1)[-1].split()[0] == "Z"
    argv0 = cmdline.split(b"\0", 1)[0].decode(errors="replace")
    return not zombie and Path(argv0).name == executable


def live_pid(pidfile: Path, executable: str) -> int | None:
    pid = read_pid(pidfile)
    return pid if pid is not None and is_running(pid, executable) else None


def spawn(argv: Sequence[str], log: Path, *, detach: bool) -> subprocess.CompletedProcess[bytes]:
    """Run a daemon with its output going to its log file, never to our pipes.

    Self-daemonising programs (`detach=False`) return once they have forked; foreground ones are
    started in their own session with `setsid --fork` so they outlive us without a zombie parent.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    command = ["setsid", "--fork", *argv] if detach else list(argv)
    with log.open("ab") as out:
        return subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, timeout=60)


def stop(pidfile: Path, executable: str, grace_s: float = STOP_GRACE_S) -> bool:
    """TERM the process in `pidfile`, KILL it after `grace_s`; True if one was running."""
    pid = live_pid(pidfile, executable)
    if pid is None:
        pidfile.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    if not wait_until(lambda: not is_running(pid, executable), grace_s):
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not is_running(pid, executable), 5.0)
    pidfile.unlink(missing_ok=True)
    return True


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0
