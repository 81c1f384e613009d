"""What the node lifecycle controller (components/lifecycle/node_repair.py) does beyond repair, from the stack config
alone:
keep Slurm's network topology current for EFA partitions (slurm/agent/topology/sync.py), and hold a maintenance
reservation over the end of each Capacity Block (slurm/agent/capacity/blocks.py). Both read EC2, so they also decide
whether the controller gets an AWS role.
"""

from __future__ import annotations

from components.config.cluster import ClusterConfig
from components.names import SLURM_NAMESPACE
from slurm.agent import contract

# The ConfigMap the Controller lists in configFileRefs: Slinky projects it into slurmctld's /etc/slurm
# (slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go controllerVolumes), and the
# controller owns its data once it runs.
TOPOLOGY_CONFIG_MAP = "slurm-eks-topology"
TOPOLOGY_FILE = "topology.yaml"
TOPOLOGY_NAME = "ec2"
SLURMD_SELECTOR = contract.SLURMD_POD_SELECTOR
# What topology.yaml holds until a slurmd pod runs (slurm/agent/topology/render.py flat_topology_yaml writes the same):
# the flat topology, Slurm's default without one (https://slurm.schedmd.com/topology.yaml.html, `flat`).
INITIAL_TOPOLOGY = f'# No Slurm node placed yet: flat (slurm-eks).\n---\n- topology: "{TOPOLOGY_NAME}"\n' \
                   "  cluster_default: true\n  flat: true\n"
# EC2 reads, each without a resource type (docs.aws.amazon.com/service-authorization/latest/reference/
# list_amazonec2.html, Actions table: DescribeInstanceTopology and DescribeCapacityReservations list none).
TOPOLOGY_ACTIONS = (f"ec2:{contract.TOPOLOGY_EC2_CALL}",)
CAPACITY_BLOCK_ACTIONS = (f"ec2:{contract.CAPACITY_BLOCK_EC2_CALL}",)


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


def topology_settings(config: ClusterConfig) -> contract.TopologySettings | None:
    """Where the controller places EFA nodes (slurm/agent/topology/sync.py); None without EFA partitions."""
    if not places_topology(config):
        return None
    return contract.TopologySettings(TOPOLOGY_NAME, SLURM_NAMESPACE, SLURMD_SELECTOR, TOPOLOGY_CONFIG_MAP,
                                     TOPOLOGY_FILE)
