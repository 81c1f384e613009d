"""Dynamic nodes on the local cluster: `slurmd -Z` joining and leaving the way Slinky's NodeSet pods do.

A NodeSet pod runs `slurmd -Z --conf "Features=<nodeset>,... Gres=gpu:<n>"` (SlinkyProject/slurm-operator
v1.2.1, internal/builder/workerbuilder/worker_app.go, `slurmdArgs`): the node creates itself in slurmctld,
which puts it into every partition whose `NodeSet=` names one of its features.

One host, one slurmd port: a dynamic slurmd listens on the cluster's SlurmdPort unless its `--conf` names a
`Port=`. Slurm 22.05 refuses that (fatal: SchedMD/slurm slurm-22-05-8-1 src/slurmd/slurmd/slurmd.c
`_validate_dynamic_conf`); from 23.11 on it is allowed (commit f30e8508b8 "Allow dynamic nodes to use defined
port"; in slurm-25-11-7-1 `_validate_dynamic_conf` refuses only `NodeName=`). The nodes here join with the
NodeSet's own `--conf`, as its pods do, and that names no port (each pod has an address of its own). So while
dynamic nodes are enabled the host's slurmd is stopped (it also would read their GPUs' gres.conf line, see
config.render_gres_conf) and one dynamic slurmd at a time holds that port. slurmctld still lists the host's
node, and whichever slurmd holds the port answers its pings: send no jobs to the host's partition meanwhile.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from slurm.local import config, daemons, node, topology
from slurm.local.errors import LocalSlurmError
from slurm.local.layout import StateLayout, default_state_dir
from slurm.local.process import live_pid, program, stop
from slurm.local.settings import chain, reconfigured

SLURMD = "slurmd"


def _scontrol(*args: str) -> None:
    result = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=15)
    if result.returncode != 0:
        raise LocalSlurmError(f"`scontrol {' '.join(args)}` failed: {(result.stderr or result.stdout).strip()}")


def _with_hostname(name: str) -> tuple[str, ...]:
    """The command prefix that runs a program with host name `name`, in a UTS namespace of its own.

    A pod's host name is its name, which is its node's (the test's NodeSet template sets no hostname), and a
    dynamic slurmd registers with its host name (SchedMD/slurm slurm-25-11-7-1 src/slurmctld/node_mgr.c
    `create_dynamic_reg_node`: node_hostname = the registration's hostname, then slurm_conf_add_node). slurmctld
    keeps one node per host name (src/common/read_config.c `_push_to_hashtbls`: "Duplicated NodeHostName",
    unless built with --enable-multiple-slurmd): under this machine's own name, taken by the host's node, the
    dynamic node gets no address, and slurmctld cannot send it a job ("_fwd_tree_get_addr: can't find address
    for host", then "unable to split forward hostlist")."""
    return ("unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', name)


class DynamicCluster:
    """The local cluster while it takes dynamic nodes (made by `dynamic_nodes`)."""

    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout
        self._joined: list[str] = []

    def _running(self) -> list[str]:
        return [name for name in self._joined if live_pid(self.layout.slurmd_files(name).pidfile, SLURMD)]

    def join(self, name: str, conf: str) -> node.NodeState:
        """Start `slurmd -Z -N <name> --conf <conf>` with host name `name`, as a NodeSet pod does, and wait until
        slurmctld has the node taking jobs."""
        if running := self._running():
            raise LocalSlurmError(f"dynamic node {running[0]} holds the slurmd port: one at a time on this host "
                                  "(see slurm.local.dynamic)")
        files = self.layout.slurmd_files(name)
        if name not in self._joined:
            self._joined.append(name)
        daemons.start(daemons.Daemon(
            name=SLURMD,
            pidfile=files.pidfile,
            log=files.log,
            argv=(*_with_hostname(name), program(SLURMD), "-Z", "-N", name, "--conf", conf),
            detach=False,
            ready=lambda: node.node_state(name) is not None,
            prepare=lambda: files.spool.mkdir(parents=True, exist_ok=True),
        ))
        return node.wait_until_usable(name, str(files.log))

    def leave(self, name: str) -> None:
        """Stop the node's slurmd and drop its spool (its pod is gone), then delete the node from slurmctld."""
        files = self.layout.slurmd_files(name)
        stop(files.pidfile, SLURMD)
        shutil.rmtree(files.spool, ignore_errors=True)
        if node.node_state(name) is not None:
            _scontrol("delete", f"nodename={name}")

    def leave_all(self) -> None:
        for name in self._joined:
            self.leave(name)


@contextmanager
def dynamic_nodes(conf_lines: Sequence[str], gpus: int, state_dir: Path | None = None) -> Iterator[DynamicCluster]:
    """The running local cluster, taking dynamic nodes until the block ends.

    slurm.conf gains MaxNodeCount (and TreeWidth, with Debian's 22.05) and `conf_lines`; gres.conf gives each
    dynamic node `gpus` fake GPUs; slurmctld restarts (it reads MaxNodeCount only at start) and the host's slurmd
    stops (see the module doc). Afterwards, also when the block failed, the dynamic nodes are gone, the files are
    as they were, and the host's node takes jobs again. Cancel the block's jobs first: a node still running one
    cannot be deleted.
    """
    layout = StateLayout(state_dir or default_state_dir())
    machine = topology.detect_node()
    host_slurmd = chain(layout)[SLURMD]
    cluster = DynamicCluster(layout)
    stop(host_slurmd.pidfile, SLURMD)
    try:
        with reconfigured(layout, config.render(layout, machine, config.DynamicNodes(tuple(conf_lines), gpus))):
            try:
                yield cluster
            finally:
                cluster.leave_all()
    finally:
        daemons.start(host_slurmd)
        node.wait_until_usable(machine.name, f"{layout.log / 'slurmctld.log'} and {host_slurmd.log}")
