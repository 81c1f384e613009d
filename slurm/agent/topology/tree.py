"""The switch tree of Slurm's topology/tree plugin, built from EC2 instance topology.

Each EC2 network node becomes a switch named after its id (opaque per-account hashes such as
nn-1234567890abcdef0). The last node of an instance's set is the one it connects to
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/how-ec2-instance-topology-works.html: the set is given
"from the upper layers to the bottom layer"), so that is the leaf switch of the Slurm nodes on the instance.

A synthetic root joins the top-layer switches: "Jobs can only span nodes connected by the same switch fabric"
(https://slurm.schedmd.com/topology.conf.html), and EC2 reports no node above its top layer. Slurm nodes on
instances without a topology record (a type DescribeInstanceTopology does not cover, an instance not yet
running) hang under their own switch below the root so that they stay schedulable. They cannot sit on the
root itself: a switch may not have both child switches and nodes ("switch %s has both child switches and
nodes", SchedMD/slurm src/plugins/topology/tree/topology_tree.c `_parse_switches`, also in Debian's 22.05.8
topology_tree.so).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from slurm.agent.topology.instance_topology import InstanceTopology

ROOT = "root"
UNPLACED = "unplaced"


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """node2 before node10, as Slurm's hostlists order them."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part)


@dataclass(frozen=True)
class Switch:
    """One SwitchName: either child switches or nodes, never both (see the module doc)."""

    name: str
    switches: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SwitchTree:
    """Leaf switches first, then each layer up, the root last; names sorted within a layer."""

    switches: tuple[Switch, ...]
    root: str

    def switch(self, name: str) -> Switch:
        return next(switch for switch in self.switches if switch.name == name)

    def leaves(self) -> dict[str, tuple[str, ...]]:
        """Leaf switch -> its Slurm nodes."""
        return {switch.name: switch.nodes for switch in self.switches if switch.nodes}

    def leaf_of(self, node: str) -> str:
        return next(name for name, nodes in self.leaves().items() if node in nodes)


def _link(parents: dict[str, str], child: str, parent: str) -> None:
    known = parents.setdefault(child, parent)
    if known != parent:
        raise ValueError(f"network node {child} is under both {known} and {parent}")


def _depth(parents: Mapping[str, str], name: str) -> int:
    depth = 0
    while name in parents:
        name, depth = parents[name], depth + 1
    return depth


def build_tree(instances: Iterable[InstanceTopology], slurm_nodes: Mapping[str, Sequence[str]],
               root: str = ROOT, unplaced: str = UNPLACED) -> SwitchTree:
    """The tree of the Slurm nodes in `slurm_nodes` (instance id -> the Slurm nodes it hosts; a Kubernetes
    node may run several slurmd pods). Instances without Slurm nodes are left out."""
    records = {instance.instance_id: instance for instance in instances if instance.placed}
    parents: dict[str, str] = {}
    leaf_nodes: dict[str, set[str]] = {}
    hosts: dict[str, str] = {}
    for instance_id, nodes in sorted(slurm_nodes.items()):
        for node in nodes:
            if hosts.setdefault(node, instance_id) != instance_id:
                raise ValueError(f"Slurm node {node} is on both {hosts[node]} and {instance_id}")
        if not nodes:
            continue
        record = records.get(instance_id)
        path = (root, *record.network_nodes) if record else (root, unplaced)
        if record and {root, unplaced} & set(record.network_nodes):
            raise ValueError(f"network node of {instance_id} is named like the synthetic {root!r}/{unplaced!r}")
        for parent, child in pairwise(path):
            _link(parents, child, parent)
        leaf_nodes.setdefault(path[-1], set()).update(nodes)
    if not leaf_nodes:
        raise ValueError("no Slurm nodes: topology.conf needs at least one switch with nodes")
    inner = set(parents.values())
    if mixed := sorted(inner & set(leaf_nodes)):
        raise ValueError(f"network nodes {mixed} are leaves of some instances and above others")
    switches = [
        Switch(name, switches=tuple(sorted(c for c, p in parents.items() if p == name)))
        if name in inner else Switch(name, nodes=tuple(sorted(leaf_nodes[name], key=natural_key)))
        for name in (*parents, root)
    ]
    switches.sort(key=lambda switch: (-_depth(parents, switch.name), switch.name))
    return SwitchTree(tuple(switches), root)
