"""`slurm-eks local up|down|status`: the whole local cluster, idempotently, from one state directory."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from slurm.local import config, daemons, node, packages, topology
from slurm.local.errors import LocalSlurmError
from slurm.local.layout import StateLayout, default_state_dir
from slurm.local.process import stop


@dataclass(frozen=True)
class DaemonStatus:
    name: str
    pid: int | None
    log: Path

    @property
    def alive(self) -> bool:
        return self.pid is not None


@dataclass(frozen=True)
class ClusterStatus:
    state_dir: Path
    daemons: tuple[DaemonStatus, ...]
    node: node.NodeState | None
    started: tuple[str, ...] = ()
    installed: tuple[str, ...] = field(default=())

    @property
    def up(self) -> bool:
        return all(d.alive for d in self.daemons) and self.node is not None and self.node.usable


def _layout(state_dir: Path | None) -> StateLayout:
    return StateLayout(state_dir or default_state_dir())


def _require_root() -> None:
    if os.geteuid() != 0:
        raise LocalSlurmError("the local cluster starts munge, MariaDB and the Slurm daemons as root: run as root")


def _refuse_other_running_cluster(layout: StateLayout) -> None:
    """Only one local cluster can hold the Slurm ports; say which one instead of failing on a port."""
    linked = config.linked_state_dir()
    if linked is None or linked == layout.root:
        return
    running = [d.name for d in daemons.daemons(StateLayout(linked)) if d.pid() is not None]
    if running:
        raise LocalSlurmError(
            f"a local cluster from {linked} is running ({', '.join(running)}): stop it first with "
            f"SLURM_EKS_LOCAL_STATE={linked} slurm-eks local down"
        )


def _node_name() -> str:
    return subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()


def status(state_dir: Path | None = None) -> ClusterStatus:
    layout = _layout(state_dir)
    found = tuple(DaemonStatus(d.name, d.pid(), d.log) for d in daemons.daemons(layout))
    ctld_alive = any(d.name == "slurmctld" and d.alive for d in found)
    return ClusterStatus(layout.root, found, node.node_state(_node_name()) if ctld_alive else None)


def pending(state_dir: Path | None = None) -> tuple[list[str], list[str]]:
    """What `up` would do: the Debian packages it would install and the daemons it would start (both empty when the
    cluster is up), for a caller that asks first."""
    chain = daemons.daemons(_layout(state_dir))
    to_start = [d.name for d in chain if d.pid() is None]
    return (packages.missing_packages() if to_start else []), to_start


def up(state_dir: Path | None = None, on_step: Callable[[str], None] | None = None) -> ClusterStatus:
    """Install what is missing, write the configs, start what is not running, wait for an idle node.

    `on_step` hears the slow steps as they start and end (today: the package install).
    """
    _require_root()
    layout = _layout(state_dir)
    chain = daemons.daemons(layout)
    if all(d.pid() is not None for d in chain):
        return status(layout.root)
    _refuse_other_running_cluster(layout)
    installed = packages.ensure_installed(on_step)
    machine = topology.detect_node()
    layout.root.mkdir(parents=True, exist_ok=True)
    config.write(layout, config.render(layout, machine))
    config.link_system_configs(layout)
    started = []
    for daemon in chain:
        if daemon.pid() is None:
            daemons.start(daemon)
            started.append(daemon.name)
    logs = f"{layout.log / 'slurmctld.log'} and {layout.log / 'slurmd.log'}"
    node.wait_until_usable(machine.name, logs)
    current = status(layout.root)
    return ClusterStatus(current.state_dir, current.daemons, current.node, tuple(started), tuple(installed))


def down(state_dir: Path | None = None) -> list[str]:
    """Stop every daemon by the pid in its pidfile, last started first; return the ones stopped."""
    _require_root()
    layout = _layout(state_dir)
    return [d.name for d in reversed(daemons.daemons(layout)) if stop(d.pidfile, d.name)]
