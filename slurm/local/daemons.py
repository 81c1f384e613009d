"""The five daemons of the local cluster, in start order, and how to start one and know it is up."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slurm.local import mariadb
from slurm.local.config import CLUSTER_NAME, MARIADB_PORT, SLURMCTLD_PORT, SLURMD_PORT, SLURMDBD_PORT
from slurm.local.errors import LocalSlurmError, daemon_failed
from slurm.local.layout import StateLayout
from slurm.local.process import live_pid, port_open, program, spawn, wait_until

START_TIMEOUT_S = 30.0
PIDFILE_TIMEOUT_S = 10.0
MUNGE_KEY = Path("/etc/munge/munge.key")
# Clients find munged only at its compiled-in socket, so munged keeps it; pid and log live in the state dir.
MUNGE_RUN_DIR = Path("/run/munge")


@dataclass(frozen=True)
class Daemon:
    name: str
    pidfile: Path
    log: Path
    argv: tuple[str, ...]
    detach: bool
    ready: Callable[[], bool]
    prepare: Callable[[], None] = lambda: None
    after_start: Callable[[], None] = lambda: None

    @property
    def console(self) -> Path:
        """Output before the daemon opens its own log (kept apart: munged insists on owning its log), named
        after that log so that each slurmd on this host has its own."""
        return self.log.with_name(f"{self.log.stem}.console.log")

    def pid(self) -> int | None:
        return live_pid(self.pidfile, self.name)


def start(daemon: Daemon, timeout_s: float = START_TIMEOUT_S) -> None:
    """Start `daemon` and wait until it is alive and ready; a clear error with its log otherwise."""
    daemon.prepare()
    result = spawn(daemon.argv, daemon.console, detach=daemon.detach)
    if result.returncode != 0:
        raise daemon_failed(
            daemon.name, f"exited with status {result.returncode} while starting", daemon.log, daemon.console
        )
    if not wait_until(lambda: daemon.pid() is not None, PIDFILE_TIMEOUT_S):
        raise daemon_failed(daemon.name, "did not start (no live pid in its pidfile)", daemon.log, daemon.console)
    # Stop waiting as soon as it dies (e.g. a port in use) instead of sitting out the whole timeout.
    wait_until(lambda: daemon.pid() is None or daemon.ready(), timeout_s)
    if daemon.pid() is None:
        raise daemon_failed(daemon.name, "exited right after starting", daemon.log, daemon.console)
    if not daemon.ready():
        raise daemon_failed(
            daemon.name, f"is running but not ready after {timeout_s:.0f} s", daemon.log, daemon.console
        )
    daemon.after_start()


def munge_works() -> bool:
    return subprocess.run([program("munge"), "-n"], capture_output=True).returncode == 0


def _unreachable_by_others(path: Path) -> Path | None:
    """The first ancestor of `path` that other users cannot enter (munged runs as `munge`)."""
    for parent in reversed(path.resolve().parents):
        if parent.exists() and not parent.stat().st_mode & 0o001:
            return parent
    return None


def _prepare_munge(layout: StateLayout) -> None:
    blocked = _unreachable_by_others(layout.munge)
    if blocked is not None:
        raise LocalSlurmError(
            f"munged runs as user munge and cannot enter {blocked} (mode {blocked.stat().st_mode & 0o777:o}), "
            f"which holds the local Slurm's state: `chmod o+x {blocked}`, or set SLURM_EKS_LOCAL_STATE to a "
            "directory outside it (for example /var/tmp/slurm-eks)")
    for directory in (MUNGE_RUN_DIR, layout.munge):
        directory.mkdir(parents=True, exist_ok=True)
        shutil.chown(directory, "munge", "munge")
        directory.chmod(0o755 if directory == MUNGE_RUN_DIR else 0o700)
    if not MUNGE_KEY.exists():
        command = ["runuser", "-u", "munge", "--", program("mungekey"), "--create", f"--keyfile={MUNGE_KEY}"]
        if subprocess.run(command, capture_output=True).returncode != 0:
            raise LocalSlurmError(f"could not create the munge key {MUNGE_KEY}")


def _register_cluster() -> None:
    """slurmctld only stores accounting for a cluster slurmdbd knows (`sacctmgr add cluster`)."""
    listed = subprocess.run(
        ["sacctmgr", "-n", "-P", "list", "cluster", "format=cluster"], capture_output=True, text=True
    )
    if CLUSTER_NAME in listed.stdout.split():
        return
    added = subprocess.run(["sacctmgr", "-i", "add", "cluster", CLUSTER_NAME], capture_output=True, text=True)
    if added.returncode != 0:
        raise LocalSlurmError(f"`sacctmgr add cluster {CLUSTER_NAME}` failed: {added.stderr.strip()}")


def _mkdirs(*directories: Path) -> Callable[[], None]:
    def make() -> None:
        for directory in directories:
            directory.mkdir(parents=True, exist_ok=True)

    return make


def daemons(layout: StateLayout) -> tuple[Daemon, ...]:
    """munge -> MariaDB -> slurmdbd -> slurmctld -> slurmd: each needs the ones before it."""
    host_slurmd = layout.slurmd_files()
    return (
        Daemon(
            name="munged",
            pidfile=layout.munge / "munged.pid",
            log=layout.munge / "munged.log",
            argv=(
                "runuser",
                "-u",
                "munge",
                "--",
                program("munged"),
                f"--pid-file={layout.munge / 'munged.pid'}",
                f"--log-file={layout.munge / 'munged.log'}",
                f"--seed-file={layout.munge / 'munged.seed'}",
            ),
            detach=False,
            ready=munge_works,
            prepare=lambda: _prepare_munge(layout),
        ),
        Daemon(
            name="mariadbd",
            pidfile=layout.mysql / "mariadbd.pid",
            log=layout.mysql / "mariadbd.err",
            argv=tuple(mariadb.argv(layout)),
            detach=True,
            ready=lambda: port_open(MARIADB_PORT) and layout.mysql_socket.exists(),
            prepare=lambda: mariadb.prepare(layout),
            after_start=lambda: mariadb.create_accounting_user(layout),
        ),
        Daemon(
            name="slurmdbd",
            pidfile=layout.run / "slurmdbd.pid",
            log=layout.log / "slurmdbd.log",
            argv=(program("slurmdbd"),),
            detach=False,
            ready=lambda: port_open(SLURMDBD_PORT),
            prepare=_mkdirs(layout.run, layout.log),
            after_start=_register_cluster,
        ),
        Daemon(
            name="slurmctld",
            pidfile=layout.run / "slurmctld.pid",
            log=layout.log / "slurmctld.log",
            # -i: start even when the state files are missing (first start) or unreadable.
            argv=(program("slurmctld"), "-i"),
            detach=False,
            ready=lambda: port_open(SLURMCTLD_PORT),
            prepare=_mkdirs(layout.ctld_state, layout.run, layout.log),
        ),
        Daemon(
            name="slurmd",
            pidfile=host_slurmd.pidfile,
            log=host_slurmd.log,
            argv=(program("slurmd"),),
            detach=False,
            ready=lambda: port_open(SLURMD_PORT),
            prepare=_mkdirs(host_slurmd.spool, layout.run, layout.log),
        ),
    )
