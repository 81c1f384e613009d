"""What the node lifecycle controller (components/lifecycle/node_repair.py) does beyond repair, from the stack config
alone:
keep Slurm's network topology current for EFA partitions (slurm/topology/sync.py), and hold a maintenance
reservation over the end of each Capacity Block (slurm/capacity/blocks.py). Both read EC2, so they also decide
whether the controller gets an AWS role.
"""

from __future__ import annotations

from typing import Any

from components.config.cluster import ClusterConfig
from components.names import SLURM_NAMESPACE

# The ConfigMap the Controller lists in configFileRefs: Slinky projects it into slurmctld's /etc/slurm
# (slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go controllerVolumes), and the
# controller owns its data once it runs.
TOPOLOGY_CONFIG_MAP = "slurm-eks-topology"
TOPOLOGY_FILE = "topology.yaml"
TOPOLOGY_NAME = "ec2"
# slurmd pods, by the label Slinky gives them (slurm-operator v1.2.1 internal/builder/labels/labels.go WorkerApp
# as app.kubernetes.io/name; the slurm namespace's NetworkPolicies select them the same way).
SLURMD_SELECTOR = "app.kubernetes.io/name=slurmd"
# What topology.yaml holds until a slurmd pod runs (slurm/topology/render.py flat_topology_yaml writes the same):
# the flat topology, Slurm's default without one (https://slurm.schedmd.com/topology.yaml.html, `flat`).
INITIAL_TOPOLOGY = f'# No Slurm node placed yet: flat (slurm-eks).\n---\n- topology: "{TOPOLOGY_NAME}"\n' \
                   "  cluster_default: true\n  flat: true\n"
# EC2 reads, each without a resource type (docs.aws.amazon.com/service-authorization/latest/reference/
# list_amazonec2.html, Actions table: DescribeInstanceTopology and DescribeCapacityReservations list none).
TOPOLOGY_ACTIONS = ("ec2:DescribeInstanceTopology",)
CAPACITY_BLOCK_ACTIONS = ("ec2:DescribeCapacityReservations",)


def places_topology(config: ClusterConfig) -> bool:
    """EC2 reports network topology for the EFA instance families (p4d, p5, trn1, ...): EFA partitions."""
    return bool(config.efa_partitions)


def capacity_blocks(config: ClusterConfig) -> dict[str, list[str]]:
    return {name: list(p.capacity_reservation_ids) for name, p in config.partitions.items()
            if p.capacity_type == "capacity-block"}


def ec2_actions(config: ClusterConfig) -> list[str]:
    """What the controller's AWS role may do; empty: it gets no role."""
    return [*(TOPOLOGY_ACTIONS if places_topology(config) else ()),
            *(CAPACITY_BLOCK_ACTIONS if capacity_blocks(config) else ())]


def lifecycle_settings(config: ClusterConfig) -> dict[str, Any]:
    """The controller's settings.json entries for these steps (slurm/health/__main__.py Controller.from_settings)."""
    topology = {"name": TOPOLOGY_NAME, "namespace": SLURM_NAMESPACE, "podSelector": SLURMD_SELECTOR,
                "configMap": TOPOLOGY_CONFIG_MAP, "key": TOPOLOGY_FILE} if places_topology(config) else None
    return {"region": config.region, "topology": topology, "capacityBlocks": capacity_blocks(config)}
