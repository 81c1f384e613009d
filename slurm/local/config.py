"""Generated slurm.conf, gres.conf and slurmdbd.conf for the one-node local cluster."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slurm.local.errors import LocalSlurmError
from slurm.local.layout import SYSTEM_CONF_DIR, StateLayout
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


@dataclass(frozen=True)
class GeneratedConfig:
    slurm_conf: str
    gres_conf: str
    slurmdbd_conf: str


def node_memory_mb(topology: NodeTopology) -> int:
    """Configured RealMemory: 95% of what slurmd reports, so a small drift never invalidates the node."""
    return max(1, topology.real_memory_mb * 95 // 100)


def render_slurm_conf(layout: StateLayout, node: NodeTopology) -> str:
    host = node.name
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
        f"SlurmdSpoolDir={layout.slurmd_spool}",
        f"SlurmctldPidFile={layout.run / 'slurmctld.pid'}",
        f"SlurmdPidFile={layout.run / 'slurmd.pid'}",
        f"SlurmctldLogFile={layout.log / 'slurmctld.log'}",
        f"SlurmdLogFile={layout.log / 'slurmd.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # No systemd/cgroups here (gVisor, PID 1 is not systemd): track processes by parentage.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/linux",
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
    return "\n".join(lines) + "\n"


def render_gres_conf(layout: StateLayout, node: NodeTopology) -> str:
    # File= is required (file-less GPUs are dropped and the node drains); symlinks to /dev/null pass
    # slurmd's character-device check without any privileges.
    return f"AutoDetect=off\nNodeName={node.name} Name=gpu File={layout.fakedev}/gpu[0-{FAKE_GPUS - 1}]\n"


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


def render(layout: StateLayout, node: NodeTopology) -> GeneratedConfig:
    return GeneratedConfig(
        slurm_conf=render_slurm_conf(layout, node),
        gres_conf=render_gres_conf(layout, node),
        slurmdbd_conf=render_slurmdbd_conf(layout),
    )


def write(layout: StateLayout, config: GeneratedConfig) -> None:
    """Write the files (slurmdbd.conf 0600: slurmdbd refuses a readable one holding a password)."""
    layout.etc.mkdir(parents=True, exist_ok=True)
    layout.slurm_conf.write_text(config.slurm_conf)
    layout.gres_conf.write_text(config.gres_conf)
    layout.slurmdbd_conf.write_text(config.slurmdbd_conf)
    layout.slurmdbd_conf.chmod(0o600)
    layout.fakedev.mkdir(parents=True, exist_ok=True)
    for index in range(FAKE_GPUS):
        device = layout.fakedev / f"gpu{index}"
        if not device.is_symlink():
            device.symlink_to("/dev/null")


def linked_state_dir() -> Path | None:
    """The state directory /etc/slurm/slurm.conf currently points into, if it is one of ours."""
    link = SYSTEM_CONF_DIR / "slurm.conf"
    if not link.is_symlink():
        return None
    return StateLayout.owning(Path(os.readlink(link))).root


def link_system_configs(layout: StateLayout) -> None:
    """Point /etc/slurm/{slurm,gres,slurmdbd}.conf at the generated files so plain `sbatch` works anywhere.

    A real file there belongs to someone else's Slurm: refuse rather than overwrite it.
    """
    SYSTEM_CONF_DIR.mkdir(parents=True, exist_ok=True)
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
