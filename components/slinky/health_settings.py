"""What each node's checks expect and which partitions get active checks, from the stack config alone.

node-check.sh (slurm/agent/health/) reads one env file per node: the NodeSet's pod mounts its partition's file at
HEALTH_ENV beside the script (components/slinky/node_health.py). Slurm runs the same script three ways: as
HealthCheckProgram (an absolute path in the pod), and as Prolog and Epilog, which Slinky's operator lists by
bare file name (slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go
buildPrologEpilogConf) so configless slurmctld ships them to every slurmd (SchedMD/slurm slurm-25-11-6-1
doc/html/configless_slurm.shtml: "ONLY ... if the filenames referenced have no path separators";
src/common/fetch_config.c loads Prolog/Epilog without a leading /).
"""

from __future__ import annotations

from components.compute.scheduling import partition_efa_interfaces, partition_instance
from components.config.base import duration_seconds
from components.config.cluster import ClusterConfig, Partition
from components.config.health import ActiveCheck
from components.names import SHARED_MOUNT

HEALTH_DIR = "/etc/slurm-eks"
NODE_CHECK = f"{HEALTH_DIR}/node-check.sh"
HEALTH_ENV = f"{HEALTH_DIR}/health.env"
PROLOG_FILE = "prolog-slurm-eks.sh"
EPILOG_FILE = "epilog-slurm-eks.sh"
# dcgm-exporter's HPC job mapping directory, written by the prolog and read by the exporter on the same node.
DCGM_JOB_MAP_DIR = "/var/run/slurm-eks/dcgm-job-map"
# The repair controller and its probes run as SlurmUser (uid 401 in Slinky's images). With accounts declared
# slurmctld enforces associations, so the stack gives it an account of its own (components/slinky/
# accounts_document.py), which partitions limited to some accounts admit when they are checked.
ACTIVE_CHECK_USER = "slurm"
# slurmd's spool (job scripts, step state) and /tmp both live on the node's root volume.
DISK_PATHS = ("/var/spool/slurmd", "/tmp")


def node_health_env(partition: Partition, config: ClusterConfig) -> str:
    """The env file node-check.sh reads on this partition's nodes."""
    instance = partition_instance(partition)
    gpus = instance.accelerators if instance.accelerator == "nvidia" else 0
    values = {
        "GPUS": gpus,
        "EFA": partition_efa_interfaces(partition),
        "NEURON_DEVICES": instance.accelerators if instance.accelerator == "neuron" else 0,
        "SHARED_MOUNT": SHARED_MOUNT,
        "DISK_PATHS": f'"{" ".join(DISK_PATHS)}"',
        "MIN_FREE_MB": config.health.min_free_disk_mib,
        "DCGM_DIAG_LEVEL": config.health.dcgm_diag_level if gpus else 0,
        "JOB_MAP_DIR": DCGM_JOB_MAP_DIR if gpus else "",
    }
    return "".join(f"{key}={value}\n" for key, value in values.items())


def health_slurm_conf(config: ClusterConfig) -> dict[str, str]:
    """slurm.conf lines for the checks (slurm.conf(5) of Slurm 25.11, SchedMD/slurm slurm-25-11-6-1
    doc/man/man5/slurm.conf.5)."""
    return {
        "HealthCheckProgram": NODE_CHECK,
        "HealthCheckInterval": str(config.health.check_interval),
        # Every state (a drained node is checked too, the controller reads the result), spread over the
        # interval rather than all nodes at once.
        "HealthCheckNodeState": "ANY,CYCLE",
        # The prolog runs when the job is allocated, on every node, before any step: a node that fails it is
        # drained and the job requeued before it started (Prolog, PrologFlags=Alloc). Contain: each job's
        # processes (the ssh'd ones too) in its own container from allocation on, which NamespaceType needs for the
        # per-job /tmp and /dev/shm (components/slinky/slurm_conf.py; slurm.conf(5): Contain "implicitly sets the
        # Alloc flag", both written out).
        "PrologFlags": "Alloc,Contain",
        # ... and requeued without a hold, so the scheduler sends it to healthy nodes at once.
        "SchedulerParameters": "nohold_on_prolog_fail",
    }


def active_checks(config: ClusterConfig) -> dict[str, ActiveCheck]:
    """Partitions that get active checks: those the stack names (enabled), else accelerator partitions with
    minNodes > 0 (a check on a scale-to-zero partition keeps its nodes from going back on time)."""
    chosen: dict[str, ActiveCheck] = {}
    for name, partition in config.partitions.items():
        if partition_instance(partition).accelerator not in ("nvidia", "neuron"):
            continue
        check = config.health.active_checks.partitions.get(name)
        if check is None and partition.min_nodes > 0:
            check = ActiveCheck()
        if check is not None and check.enabled:
            chosen[name] = check
    return chosen


def active_interval_seconds(config: ClusterConfig) -> int:
    return duration_seconds(config.health.active_checks.interval)
