"""The Slurm configuration text we add to what the operator generates (slurm.conf, gres.conf, plugstack.conf).

Since Slinky 1.2 the operator no longer sets `GresTypes=gpu`: a GPU partition needs all three of
`GresTypes=gpu` (slurm.conf), `AutoDetect=nvidia` (gres.conf) and `Gres=gpu:<n>` (the NodeSet's slurmd
`--conf`). Missing any one leaves `--gpus-per-node` jobs pending forever.
"""

from __future__ import annotations

from components.catalog import InstanceType
from components.config import ClusterConfig, Partition

GRES_CONF = "AutoDetect=nvidia\n"
# A glob, so slurmctld (which has no pyxis) does not fail on the include; slurmd and login have pyxis.
PLUGSTACK_CONF = "include /usr/share/pyxis/*\n"


def has_gpu_partition(instances: dict[str, InstanceType]) -> bool:
    return any(i.accelerator == "nvidia" for i in instances.values())


def controller_extra_conf(instances: dict[str, InstanceType]) -> str | None:
    """Lines appended to slurm.conf."""
    return "GresTypes=gpu" if has_gpu_partition(instances) else None


def config_files(instances: dict[str, InstanceType]) -> dict[str, dict[str, str]]:
    """ConfigMaps (name -> files) mounted into /etc/slurm and served to slurmd and login by configless."""
    files = {"slurm-plugstack": {"plugstack.conf": PLUGSTACK_CONF}}
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


def partition_conf(name: str, config: ClusterConfig) -> str:
    """Options on the operator's `PartitionName=<name> Nodes=<name>` line (one line, CRD pattern)."""
    partition = config.partitions[name]
    options = [f"MaxTime={partition.max_time}", "State=UP"]
    if name == config.default_partition:
        options.append("Default=YES")
    return " ".join(options)
