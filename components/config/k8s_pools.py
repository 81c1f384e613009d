"""Accelerator nodes for Kubernetes workloads (`kubernetesPools.<name>`): Ray workers, MPIJob workers,
notebooks and Volcano jobs. Slurm never sees these nodes: they carry their own label and taint
(components/compute/nodepools.py POOL_LABEL), not a partition's.

`NodeGroup` holds what a Karpenter EC2NodeClass + NodePool is built from; a Slurm partition
(components/config/cluster.py Partition) is a NodeGroup plus its Slurm settings, so both share one set of fields,
one builder and one set of rules (components/config/rules/). This module imports only config_base, so
config.py can hang the pools into ClusterConfig without an import cycle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.base import Duration, Model


class NodeGroup(Model):
    """The nodes Karpenter launches for one partition or pool."""

    instance_types: list[str] = Field(min_length=1)
    min_nodes: int = Field(0, ge=0)
    max_nodes: int = Field(ge=0)
    efa: bool = False
    # reserved: On-Demand Capacity Reservations (ODCRs); capacity-block: EC2 Capacity Blocks for ML, reservations
    # of one instance type in one zone that end at a fixed time (components/compute/nodepools.py, slurm/capacity).
    capacity_type: Literal["on-demand", "spot", "reserved", "capacity-block"] = "on-demand"
    capacity_reservation_ids: list[str] = Field(default_factory=list)  # cr-...: the ODCRs or the Capacity Blocks
    # How long a node may sit empty before it is given back to EC2 (NodePool disruption.consolidateAfter).
    idle_timeout: Duration = "10m"

    @property
    def reserved(self) -> bool:
        """Whether the nodes launch only into the listed reservations (ODCRs or Capacity Blocks)."""
        return self.capacity_type in ("reserved", "capacity-block")


class KubernetesPool(NodeGroup):
    """GPU or Trainium nodes only Kubernetes workloads that select and tolerate the pool run on. `minNodes`
    must stay 0 (validator `pool-min-nodes`): Karpenter launches a node only for a pending pod that needs it."""
