"""A real one-node Slurm (munge, MariaDB, slurmdbd, slurmctld, slurmd) on this machine, for trying jobs
and for the test suite. Entry points: `up`, `down`, `status`."""

from slurm.local.cluster import ClusterStatus, DaemonStatus, down, pending, status, up
from slurm.local.errors import LocalSlurmError
from slurm.local.layout import StateLayout, default_state_dir

__all__ = [
    "ClusterStatus",
    "DaemonStatus",
    "LocalSlurmError",
    "StateLayout",
    "default_state_dir",
    "down",
    "pending",
    "status",
    "up",
]
