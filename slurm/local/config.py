"""Generated slurm.conf, gres.conf and slurmdbd.conf for the one-node local cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slurm.local.errors import LocalSlurmError
from slurm.local.installation import conf_dir, debian_slurm
from slurm.local.layout import StateLayout
from slurm.local.topology import NodeTopology

CLUSTER_NAME = "local"
PARTITION = "cpu"
FAKE_GPUS = 2
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
# Off MariaDB's default 3306 so a MariaDB already on the machine does not collide with ours.
MARIADB_PORT = 6833
DB_NAME = "slurm_acct_db"
DB_USER = "slurm"
DB_PASSWORD = "slurm-local"  # local-only DB bound to 127.0.0.1
# A requeued job may not restart before the credential lifetime has passed (default 120 s).
CRED_EXPIRE_S = 5
# Keep finished jobs visible to squeue (restart count, stdout path) for five minutes.
MIN_JOB_AGE_S = 300
# Room for dynamic nodes in slurmctld's node table: the value Slinky's operator writes (slurm-operator v1.2.1,
# internal/builder/controllerbuilder/controller_config.go). Changing it needs a slurmctld restart.
MAX_NODE_COUNT = 1024
# Slurm 22.05 cannot fan messages out through dynamic nodes: doc/html/dynamic_nodes.shtml (slurm-22-05-8-1)
# requires TreeWidth=65533; from 23.11 on nodes are reached through alias_addrs and this is not needed (25.11's
# dynamic_nodes.shtml: the controller passes the node addresses on so "they communicate, and even fanout"). Only
# with Debian's 22.05, then: Slinky's operator does not set it.
NO_FANOUT = "TreeWidth=65533"
# slurmd expands %n to its node name: each slurmd on this host gets its own spool, pidfile and log.
EACH_NODE = "%n"
TOPOLOGY_CONF = "topology.conf"
# No systemd/cgroups here (gVisor, PID 1 is not systemd): track processes by parentage. A cluster's own
# cgroup plugins cannot replace these here.
MACHINE_SETTINGS = {
    "ProctrackType": "proctrack/linuxproc",
    "TaskPlugin": "task/none",
    "JobAcctGatherType": "jobacct_gather/linux",
}
# Cluster settings the one-node Slurm leaves out: NamespaceType needs a job_container.conf and a private mount
# namespace per job (slurmd refuses to start without the file: src/plugins/namespace/tmpfs/read_jcconf.c "No %s
# file"); the twin runs it as the cluster does (tests/twin/test_journey_steps.py).
LEFT_TO_THE_TWIN = frozenset({"namespacetype"})


@dataclass(frozen=True)
class DynamicNodes:
    """Dynamic nodes (`slurmd -Z`) joining the cluster, each with `gpus` fake GPUs. `conf_lines` are added to
    slurm.conf: records such as Slinky's `NodeSet=` and `PartitionName=` lines that place the nodes, and
    settings (`Key=value`) of the cluster they stand for, which replace the local ones except MACHINE_SETTINGS."""

    conf_lines: tuple[str, ...]
    gpus: int


@dataclass(frozen=True)
class GeneratedConfig:
    slurm_conf: str
    gres_conf: str
    slurmdbd_conf: str
    # Symlinks fakedev/gpu0..N-1, as many as gres.conf names.
    fake_gpus: int = FAKE_GPUS
    # topology.conf for TopologyPlugin=topology/tree (slurm/agent/topology/render.py); None: no such file.
    topology_conf: str | None = None


def node_memory_mb(topology: NodeTopology) -> int:
    """Configured RealMemory: 95% of what slurmd reports, so a small drift never invalidates the node."""
    return max(1, topology.real_memory_mb * 95 // 100)


def _setting_key(line: str) -> str | None:
    """`key` of a one-item `Key=value` line (Slurm keys ignore case); None for records such as NodeName=."""
    return line.split("=", 1)[0].lower() if len(line.split()) == 1 else None


def _merged(lines: list[str], additions: Sequence[str]) -> list[str]:
    """`lines` plus `additions`, each setting given once (slurmctld logs an error for every repeated one)."""
    merged = list(lines)
    machine = {key.lower() for key in MACHINE_SETTINGS} | LEFT_TO_THE_TWIN
    for line in additions:
        key = _setting_key(line)
        if key in machine:
            continue
        same = [i for i, old in enumerate(merged) if _setting_key(old) == key] if key else []
        if same:
            merged[same[0]] = line
        else:
            merged.append(line)
    return merged


def render_slurm_conf(layout: StateLayout, node: NodeTopology, dynamic: DynamicNodes | None = None,
                      settings: Sequence[str] = ()) -> str:
    """The one-node cluster; with `dynamic`, also taking dynamic nodes (see DynamicNodes); `settings` (`Key=value`
    lines of the cluster the tests stand for) replace the local ones, except MACHINE_SETTINGS."""
    host = node.name
    slurmd = layout.slurmd_files(EACH_NODE if dynamic else None)
    lines = [
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=cred_expire={CRED_EXPIRE_S}",
        f"SlurmctldPort={SLURMCTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        f"StateSaveLocation={layout.ctld_state}",
        f"SlurmdSpoolDir={slurmd.spool}",
        f"SlurmctldPidFile={layout.run / 'slurmctld.pid'}",
        f"SlurmdPidFile={slurmd.pidfile}",
        f"SlurmctldLogFile={layout.log / 'slurmctld.log'}",
        f"SlurmdLogFile={slurmd.log}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        *(f"{key}={value}" for key, value in MACHINE_SETTINGS.items()),
        "MpiDefault=none",
        "MailProg=/bin/true",
        "SchedulerType=sched/backfill",
        # Test all pending jobs every 2 s (default 60): a requeued job starts as soon as it is eligible.
        "SchedulerParameters=sched_interval=2",
        # Cores only: with memory as a consumable every job would take the whole node's memory.
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={SLURMDBD_PORT}",
        "AccountingStorageTRES=gres/gpu",
        "JobCompType=jobcomp/none",
        f"MinJobAge={MIN_JOB_AGE_S}",
        "ReturnToService=2",
        "InactiveLimit=0",
        (
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={node.cpus} Boards={node.boards}"
            f" SocketsPerBoard={node.sockets_per_board} CoresPerSocket={node.cores_per_socket}"
            f" ThreadsPerCore={node.threads_per_core} RealMemory={node_memory_mb(node)}"
            f" Gres=gpu:{FAKE_GPUS} State=UNKNOWN"
        ),
        f"PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]
    if dynamic:
        fanout = [NO_FANOUT] if debian_slurm() else []
        lines = _merged(lines, [f"MaxNodeCount={MAX_NODE_COUNT}", *fanout, *dynamic.conf_lines])
    return "\n".join(_merged(lines, settings)) + "\n"


def _fake_gpus_line(layout: StateLayout, count: int) -> str:
    # File= is required (file-less GPUs are dropped and the node drains); symlinks to /dev/null pass
    # slurmd's character-device check without any privileges.
    return f"Name=gpu File={layout.fakedev}/gpu[0-{count - 1}]"


def render_gres_conf(layout: StateLayout, node: NodeTopology, dynamic: DynamicNodes | None = None) -> str:
    lines = ["AutoDetect=off", f"NodeName={node.name} {_fake_gpus_line(layout, FAKE_GPUS)}"]
    if dynamic and dynamic.gpus:
        # No NodeName=: the line is for every node, like Slinky's cluster-wide `AutoDetect=nvidia`. The host's
        # own slurmd would read it too, which is why it is stopped while dynamic nodes use this file.
        lines.append(_fake_gpus_line(layout, dynamic.gpus))
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(layout: StateLayout) -> str:
    lines = [
        "AuthType=auth/munge",
        "DbdHost=localhost",
        f"DbdPort={SLURMDBD_PORT}",
        "SlurmUser=root",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={MARIADB_PORT}",
        f"StorageUser={DB_USER}",
        f"StoragePass={DB_PASSWORD}",
        f"StorageLoc={DB_NAME}",
        f"LogFile={layout.log / 'slurmdbd.log'}",
        f"PidFile={layout.run / 'slurmdbd.pid'}",
        "DebugLevel=info",
    ]
    return "\n".join(lines) + "\n"


def render(layout: StateLayout, node: NodeTopology, dynamic: DynamicNodes | None = None,
           settings: Sequence[str] = (), topology_conf: str | None = None) -> GeneratedConfig:
    return GeneratedConfig(
        slurm_conf=render_slurm_conf(layout, node, dynamic, settings),
        gres_conf=render_gres_conf(layout, node, dynamic),
        slurmdbd_conf=render_slurmdbd_conf(layout),
        fake_gpus=max(FAKE_GPUS, dynamic.gpus if dynamic else 0),
        topology_conf=topology_conf,
    )


def _topology_files(layout: StateLayout) -> tuple[Path, Path]:
    """The generated topology.conf and where Slurm looks for it: beside the slurm.conf it was started with, in the
    configuration directory of the Slurm in use (SchedMD/slurm src/common/read_config.c `get_extra_conf_path`:
    the directory of the slurm.conf path it was given, not of the file that path links to)."""
    return layout.etc / TOPOLOGY_CONF, conf_dir() / TOPOLOGY_CONF


def _write_topology(layout: StateLayout, text: str | None) -> None:
    generated, link = _topology_files(layout)
    ours = link.is_symlink() and Path(os.readlink(link)) == generated
    if text is None:
        generated.unlink(missing_ok=True)
        if ours:
            link.unlink()
        return
    if link.exists() and not link.is_symlink():
        raise LocalSlurmError(f"{link} is a regular file, not a link made by slurm-eks: another Slurm is configured")
    generated.write_text(text)
    if not ours:
        link.unlink(missing_ok=True)
        link.symlink_to(generated)


def read(layout: StateLayout) -> GeneratedConfig:
    """The config files as they are now (to put them back exactly after a temporary change)."""
    return GeneratedConfig(
        slurm_conf=layout.slurm_conf.read_text(),
        gres_conf=layout.gres_conf.read_text(),
        slurmdbd_conf=layout.slurmdbd_conf.read_text(),
        topology_conf=path.read_text() if (path := _topology_files(layout)[0]).exists() else None,
    )


def write(layout: StateLayout, config: GeneratedConfig) -> None:
    """Write the files (slurmdbd.conf 0600: slurmdbd refuses a readable one holding a password)."""
    layout.etc.mkdir(parents=True, exist_ok=True)
    layout.slurm_conf.write_text(config.slurm_conf)
    layout.gres_conf.write_text(config.gres_conf)
    layout.slurmdbd_conf.write_text(config.slurmdbd_conf)
    layout.slurmdbd_conf.chmod(0o600)
    layout.fakedev.mkdir(parents=True, exist_ok=True)
    wanted = [layout.fakedev / f"gpu{index}" for index in range(config.fake_gpus)]
    for device in wanted:
        if not device.is_symlink():
            device.symlink_to("/dev/null")
    for device in set(layout.fakedev.iterdir()) - set(wanted):
        device.unlink()
    _write_topology(layout, config.topology_conf)


def linked_state_dir() -> Path | None:
    """The state directory the Slurm in use's slurm.conf (conf_dir()) currently points into, if it is one of ours."""
    link = conf_dir() / "slurm.conf"
    if not link.is_symlink():
        return None
    return StateLayout.owning(Path(os.readlink(link))).root


def link_system_configs(layout: StateLayout) -> None:
    """Point /etc/slurm/{slurm,gres,slurmdbd}.conf at the generated files so plain `sbatch` works anywhere.

    A real file there belongs to someone else's Slurm: refuse rather than overwrite it.
    """
    conf_dir().mkdir(parents=True, exist_ok=True)
    for link, target in layout.system_links().items():
        if link.exists() and not link.is_symlink():
            raise LocalSlurmError(
                f"{link} is a regular file, not a link made by slurm-eks: another Slurm is configured here. "
                "Move it away to use the local cluster."
            )
        temporary = link.with_name(f".{link.name}.slurm-eks")
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(target)
        temporary.replace(link)
