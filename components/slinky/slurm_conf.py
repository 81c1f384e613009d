"""The Slurm configuration text we add to what the operator generates (slurm.conf, cgroup.conf, gres.conf,
plugstack.conf).

Since Slinky 1.2 the operator no longer sets `GresTypes=gpu`: a GPU partition needs all three of
`GresTypes=gpu` (slurm.conf), `AutoDetect=nvidia` (gres.conf) and `Gres=gpu:<n>` (the NodeSet's slurmd
`--conf`). Missing any one leaves `--gpus-per-node` jobs pending forever.

Jobs share nodes, so each is fenced into what it was given. The operator's slurm.conf (v1.2.1
internal/builder/controllerbuilder/controller_config.go buildSlurmConf) names none of the plugins below and
merges only SlurmctldParameters, AuthInfo and AuthAltParameters with extraConf; it writes its own cgroup.conf
(`CgroupPlugin=cgroup/v2`, `IgnoreSystemd=yes`) only when no configFileRefs ConfigMap has one, so ours
keeps those two lines. Keys and values: slurm.conf(5) and cgroup.conf(5) of Slurm 25.11 (SchedMD/slurm
slurm-25-11-6-1, doc/man/man5).

A stack that declares Slurm accounts (`slurm.accounts`, reconciled by components/slinky/accounts.py) gets
fair-share priorities and enforced limits (`accounting_conf`), and partitions limited to some accounts an
`AllowAccounts=` list.
"""

from __future__ import annotations

from components.catalog import InstanceType
from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig, Partition
from components.config.health import HEALTH_ACCOUNT
from components.slinky.health_settings import active_checks

# The ports srun listens on: slurmctld calls each srun back there (time-limit warnings, node failures, step
# completion: SchedMD/slurm slurm-25-11-7-1 src/stepmgr/srun_comm.c, to the port srun registered) and the
# step's slurmstepds send it their messages and the tasks' I/O. Unset, each is any port the kernel hands out,
# which a NetworkPolicy can only admit wholesale. slurm.conf(5) SrunPortRange: "Using this parameter allow sites
# to configure a range of ports from which srun ports will be selected". This range lies above Linux's
# ephemeral ports (net.ipv4.ip_local_port_range, 32768-60999 by default), so no outgoing connection or
# port-0 listener (NCCL's, torchrun's) on a pod ever holds one of them, and below 65535.
# components/segmentation/network_policies.py opens exactly this range from slurmctld and from slurmd pods to where srun
# runs: login pods, and slurmd pods (an srun inside a batch script). Each pod has its own network namespace,
# so the range is per pod. Size: inside an allocation (a batch script) srun opens 3 listening ports for up to
# 48 nodes: the step's callback socket (src/srun/step_ctx.c), and one message and one I/O socket per 48 nodes
# (src/api/step_launch.c _msg_thr_create, src/api/step_io.c, _estimate_nports(nodes, 48)); making its own
# allocation (on a login pod) one more (src/api/allocate_msg.c), with --pty one more again (slurm.conf(5):
# "A single srun opens 4 listening ports plus 2 more for every 48 hosts beyond the first 48"). 4000 ports
# hold 1333 concurrent sruns of up to 48 nodes in one slurmd pod, 1000 (800 with --pty) in one login pod.
SRUN_PORT_RANGE = (61000, 64999)

SLURM_CONF: dict[str, str] = {
    # 25.11's defaults, written out because the lines below depend on them: memory is a consumable resource,
    # which MemSpecLimit (how slurmd's image keeps Slurm within the pod's memory) and ConstrainRAMSpace need.
    "SelectType": "select/cons_tres",
    "SelectTypeParameters": "CR_Core_Memory",
    # The man page's recommendation: task/affinity sets each task's CPU mask, task/cgroup fences the job into
    # its cores, memory and GRES devices (cgroup.conf below).
    "TaskPlugin": "task/cgroup,task/affinity",
    "ProctrackType": "proctrack/cgroup",
    "JobAcctGatherType": "jobacct_gather/cgroup",
    # slurmstepd answers the job's user and groups (sent by the login pod's sackd with Slinky's
    # AuthInfo=use_client_ids) to the step through nss_slurm, which Slinky's slurmd image lists first in
    # nsswitch.conf: steps resolve people without a directory on the compute pods (SchedMD/slurm
    # slurm-25-11-6-1 doc/html/nss_slurm.shtml, doc/man/man5/slurm.conf.5 LaunchParameters).
    "LaunchParameters": "enable_nss_slurm",
    # slurmd runs privileged (components/slinky/host_access.py): root's jobs would run with the node's powers.
    # People submit as themselves (components/slinky/identity.py) and nothing of ours submits as root (the
    # accounts Job runs sacctmgr, not a job), so root runs no job at all (slurm.conf(5) DisableRootJobs).
    "DisableRootJobs": "YES",
    "SrunPortRange": f"{SRUN_PORT_RANGE[0]}-{SRUN_PORT_RANGE[1]}",
    # Each job gets its own /tmp and /dev/shm, which go when it ends: nothing one job (or person) leaves there is
    # read by the next on the node (slurm.conf(5) 25.11 NamespaceType: namespace/tmpfs "create[s] a private
    # namespace on the filesystem for jobs, which houses temporary file systems (/tmp and /dev/shm) for each job";
    # "To use these plugins, 'PrologFlags=Contain' must be set": components/slinky/health_settings.py sets it).
    # Configured by job_container.conf (JOB_CONTAINER_CONF), which configless serves to slurmd (SchedMD/slurm
    # slurm-25-11-7-1 src/common/fetch_config.c slurmd_config_files).
    "NamespaceType": "namespace/tmpfs",
}
GPU_CONF: dict[str, str] = {
    "GresTypes": "gpu",
    # GPU-hours in sacct and in fair share (also records gres/gpumem and gres/gpuutil).
    "AccountingStorageTRES": "gres/gpu",
}
CGROUP_CONF: dict[str, str] = {
    "CgroupPlugin": "cgroup/v2",
    "IgnoreSystemd": "yes",  # slurmd runs in a container with no systemd
    "ConstrainCores": "yes",
    "ConstrainRAMSpace": "yes",
    # A job sees only the GPUs it was allocated. Devices that are not GRES (Neuron, EFA) stay open: the
    # cgroup/v2 device filter's default action is accept (src/plugins/cgroup/v2/cgroup_v2.c close_ebpf_prog),
    # so nodes with them go to one person at a time (shares_open_devices below).
    "ConstrainDevices": "yes",
}
GRES_CONF = "AutoDetect=nvidia\n"
# job_container.conf(5) 25.11: the plugin keeps each job's directories under BasePath, which "must be unique to each
# node" (%n: the Slurm node name, so even slurmd pods that shared a directory would not collide) and must not be
# one of Dirs; AutoBasePath creates it (0755) at slurmd start. /dev/shm becomes a fresh tmpfs per job
# (src/plugins/namespace/tmpfs/namespace_tmpfs.c), so NCCL's shared memory is the job's own too.
NAMESPACE_BASE = "/var/spool/slurmd/namespace/%n"
JOB_PRIVATE_DIRS = ("/tmp", "/dev/shm")  # what each job sees empty and its own
JOB_CONTAINER_CONF = f"AutoBasePath=true\nBasePath={NAMESPACE_BASE}\nDirs={','.join(JOB_PRIVATE_DIRS)}\n"
# A glob, so slurmctld (which has no pyxis) does not fail on the include; slurmd and login have pyxis.
PLUGSTACK_CONF = "include /usr/share/pyxis/*\n"


def has_gpu_partition(instances: dict[str, InstanceType]) -> bool:
    return any(i.accelerator == "nvidia" for i in instances.values())


def lines(options: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in options.items())


def accounting_conf(config: ClusterConfig) -> dict[str, str]:
    """slurm.conf lines for the stack's accounts, QoS and fair share; none while it declares no account."""
    if not config.slurm.accounts:
        return {}
    priority = config.slurm.priority
    return {
        # The job's priority is the weighted sum of its factors (25.11's default plugin; 22.05's is
        # priority/basic, first in first out).
        "PriorityType": "priority/multifactor",
        "PriorityWeightAge": str(priority.weights.age),
        "PriorityWeightFairshare": str(priority.weights.fairshare),
        "PriorityWeightJobSize": str(priority.weights.job_size),
        "PriorityWeightPartition": str(priority.weights.partition),
        "PriorityWeightQOS": str(priority.weights.qos),
        "PriorityDecayHalfLife": priority.decay_half_life,
        "PriorityMaxAge": priority.max_age,
        # slurm.conf(5) AccountingStorageEnforce: associations, no job runs without an association;
        # limits, association limits (GrpTRES, ...) apply; qos, a job needs a valid QoS and QoS limits
        # apply; safe, where a TRES-minutes limit is set a job starts only if it can run to completion
        # within it (it is never killed by the limit).
        "AccountingStorageEnforce": "associations,limits,qos,safe",
    }


def token_conf(config: ClusterConfig) -> dict[str, str]:
    """A bound on the JWTs people mint with `scontrol token` (the slurmrestd credential of notebooks): slurm.conf(5)
    25.11 AuthAltParameters max_token_lifespan, "max lifespan (in seconds) for any token generated for user
    accounts. Limit applies to all users except SlurmUser". The operator merges AuthAltParameters with its own
    jwt_key (slurm-operator v1.2.1 controller_config.go buildSlurmConf; the twin's operator port shows it)."""
    return {"AuthAltParameters": f"max_token_lifespan={config.slurm.restapi.max_token_lifespan}"}


def controller_extra_conf(instances: dict[str, InstanceType]) -> str:
    """Lines appended to slurm.conf."""
    return lines(SLURM_CONF | (GPU_CONF if has_gpu_partition(instances) else {}))


def config_files(instances: dict[str, InstanceType]) -> dict[str, dict[str, str]]:
    """ConfigMaps (name -> files) mounted into /etc/slurm and served to slurmd and login by configless."""
    files = {"slurm-plugstack": {"plugstack.conf": PLUGSTACK_CONF}, "slurm-cgroup": {"cgroup.conf": lines(CGROUP_CONF)},
             "slurm-job-container": {"job_container.conf": JOB_CONTAINER_CONF}}
    if has_gpu_partition(instances):
        files["slurm-gres"] = {"gres.conf": GRES_CONF}
    return files


def node_features(partition: Partition, instance: InstanceType) -> list[str]:
    """`--constraint` targets: the accelerator model and efa (the operator adds the NodeSet's name)."""
    features = [instance.accelerator_model.lower()] if instance.accelerator_model else []
    return features + (["efa"] if partition.efa else [])


def nodeset_extra_conf(partition: Partition, instance: InstanceType) -> str:
    """slurmd `--conf` node parameters, space separated (the operator splits on spaces)."""
    items = [f"Gres=gpu:{instance.accelerators}"] if instance.accelerator == "nvidia" else []
    features = node_features(partition, instance)
    if features:
        items.append(f"Features={','.join(features)}")
    return " ".join(items)


def shares_open_devices(partition: Partition) -> bool:
    """Whether a node of the partition has devices a job can open without being given them: Neuron devices and EFA
    interfaces are not GRES here, so ConstrainDevices does not fence them (CGROUP_CONF). Such nodes go to one person
    at a time (slurm.conf(5) ExclusiveUser=YES: "nodes will be exclusively allocated to users. Multiple jobs may be
    run for the same user, but only one user can be active at a time"); the rendered jobs take whole nodes anyway
    (--exclusive), so only hand-written jobs that would have shared a node with someone else wait instead."""
    instance = partition_instance(partition)
    return instance.accelerator == "neuron" or (partition.efa and instance.has_efa)


def partition_conf(name: str, config: ClusterConfig) -> str:
    """Options on the operator's `PartitionName=<name> Nodes=<name>` line (one line, CRD pattern)."""
    partition = config.partitions[name]
    options = [f"MaxTime={partition.max_time}", "State=UP"]
    if shares_open_devices(partition):
        options.append("ExclusiveUser=YES")
    if name == config.default_partition:
        options.append("Default=YES")
    if partition.accounts:
        # Only these accounts' jobs (and their sub-accounts': "This list is hierarchical"), and the active
        # checks' probes where they run (components/slinky/health_settings.py).
        checked = [HEALTH_ACCOUNT] if name in active_checks(config) else []
        options.append(f"AllowAccounts={','.join([*partition.accounts, *checked])}")
    return " ".join(options)
