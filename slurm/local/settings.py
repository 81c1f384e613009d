"""The running local cluster with another slurm.conf for a while: settings of the cluster the tests stand
for (`with_settings`), or dynamic nodes (slurm/local/dynamic.py). Either way the files come back as they
were, also when the block fails."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from slurm.local import config, daemons, node, topology
from slurm.local.layout import StateLayout, default_state_dir
from slurm.local.process import stop


def restart(daemon: daemons.Daemon) -> None:
    stop(daemon.pidfile, daemon.name)
    daemons.start(daemon)


def chain(layout: StateLayout) -> dict[str, daemons.Daemon]:
    return {daemon.name: daemon for daemon in daemons.daemons(layout)}


@contextmanager
def reconfigured(layout: StateLayout, changed: config.GeneratedConfig) -> Iterator[daemons.Daemon]:
    """The config files replaced by `changed` and slurmctld restarted (it reads some settings, such as
    PriorityType and MaxNodeCount, only when it starts); afterwards the files as they were and slurmctld
    restarted again. Yields slurmctld."""
    found = config.read(layout)
    ctld = chain(layout)["slurmctld"]
    try:
        config.write(layout, changed)
        restart(ctld)
        yield ctld
    finally:
        config.write(layout, found)
        restart(ctld)


@dataclass(frozen=True)
class SettingsCluster:
    """The local cluster while it runs with other settings (made by `with_settings`)."""

    controller: daemons.Daemon
    host: str

    def restart_controller(self) -> None:
        """Restart slurmctld, which recomputes fair-share factors from recorded usage as it starts
        (priority/multifactor's decay thread runs at once, then every PriorityCalcPeriod)."""
        restart(self.controller)
        node.wait_until_usable(self.host, str(self.controller.log))


@contextmanager
def with_settings(settings: Sequence[str], state_dir: Path | None = None,
                  topology_conf: str | None = None) -> Iterator[SettingsCluster]:
    """The running local cluster with `settings` (`Key=value` lines, e.g. a stack's priority and enforcement
    lines) in slurm.conf, and `topology_conf` as topology.conf, until the block ends; slurmctld and the host's
    slurmd restarted on both ends."""
    layout = StateLayout(state_dir or default_state_dir())
    machine = topology.detect_node()
    host_slurmd = chain(layout)["slurmd"]
    try:
        changed = config.render(layout, machine, settings=settings, topology_conf=topology_conf)
        with reconfigured(layout, changed) as ctld:
            restart(host_slurmd)
            node.wait_until_usable(machine.name, f"{ctld.log} and {host_slurmd.log}")
            yield SettingsCluster(ctld, machine.name)
    finally:
        restart(host_slurmd)
        node.wait_until_usable(machine.name, f"{layout.log / 'slurmctld.log'} and {host_slurmd.log}")
