"""Rules on partitions: names, instance types the catalog knows, accelerators, EFA, node counts, capacity
reservations and Capacity Blocks, the default partition."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components import catalog
from components.config.cluster import ClusterConfig
from components.config.rules.registry import K8S_NAME, MAX_PARTITION_NAME, Found, known_types, node_groups, rule


@rule("partition-name")
def partition_name(c: ClusterConfig) -> Iterator[Found]:
    for name in c.partitions:
        if not K8S_NAME.match(name) or len(name) > MAX_PARTITION_NAME:
            yield Found(f"partitions.{name}", name,
                        "partition names become Slurm partitions and Kubernetes object names",
                        f"use lowercase letters, digits and '-' (at most {MAX_PARTITION_NAME}), "
                        "starting and ending with a letter or digit, e.g. gpu-h100")


@rule("instance-type-known")
def instance_type_known(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        for i, t in enumerate(p.instance_types):
            if t not in catalog.CATALOG:
                near = catalog.nearest_instance_types(t)
                hint = f"did you mean {' or '.join(near)}?" if near else ""
                yield Found(f"{where}.instanceTypes[{i}]", t,
                            "not in the instance catalog (components/catalog.py)",
                            f"{hint} known: {', '.join(catalog.CATALOG)}".strip())


@rule("partition-accelerators")
def partition_accelerators(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        kinds = {(t.accelerator, t.accelerator_model, t.accelerators) for t in known_types(p)}
        if len(kinds) > 1:
            seen = ", ".join(f"{t.name}={t.accelerators}x{t.accelerator_model}" for t in known_types(p))
            yield Found(f"{where}.instanceTypes", p.instance_types,
                        f"mixes accelerators ({seen}): a partition or pool is one kind and count per node",
                        "split these instance types into separate partitions (or pools)")


@rule("efa-supported")
def efa_supported(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        if p.efa:
            lacking = [t.name for t in known_types(p) if not t.has_efa]
            if lacking:
                yield Found(f"{where}.efa", True, f"{', '.join(lacking)} has no EFA interface",
                            "set efa: false, or use instance types with EFA (p4d, p5, trn1, ...)")


@rule("efa-interface-count", "warning")
def efa_interface_count(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        counts = sorted({t.efa_interfaces for t in known_types(p)})
        if p.efa and len(counts) > 1:
            yield Found(f"{where}.instanceTypes", p.instance_types,
                        f"EFA interface counts differ ({counts}); each node requests {counts[0]}",
                        "split the types into partitions to use every interface")


@rule("efa-capacity-type")
def efa_capacity_type(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        if p.efa and p.capacity_type == "spot":
            yield Found(f"{where}.capacityType", "spot",
                        "a multi-node EFA job loses every rank when one spot node is reclaimed",
                        "use on-demand, reserved or capacity-block for EFA partitions")


@rule("node-counts")
def node_counts(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        if p.min_nodes > p.max_nodes:
            yield Found(f"{where}.minNodes", p.min_nodes,
                        f"minNodes is larger than maxNodes ({p.max_nodes})",
                        "keep 0 <= minNodes <= maxNodes")
        if p.max_nodes == 0:
            noun = "partition" if where.startswith("partitions.") else "pool"
            yield Found(f"{where}.maxNodes", 0, f"a {noun} that can never have a node",
                        "set maxNodes >= 1, or remove it")


@rule("capacity-reservations")
def capacity_reservations(c: ClusterConfig) -> Iterator[Found]:
    for where, p in node_groups(c):
        if p.reserved and not p.capacity_reservation_ids:
            what = "capacity reservations" if p.capacity_type == "reserved" else "capacity reservations of its blocks"
            yield Found(f"{where}.capacityReservationIds", [],
                        f"capacityType {p.capacity_type} needs the {what} to launch into",
                        "list them, e.g. capacityReservationIds: [cr-0123456789abcdef0]")
        for i, cr in enumerate(p.capacity_reservation_ids):
            if not re.fullmatch(r"cr-[0-9a-f]{8,17}", cr):
                yield Found(f"{where}.capacityReservationIds[{i}]", cr,
                            "not a capacity reservation ID", "use an ID such as cr-0123456789abcdef0")
        if p.capacity_reservation_ids and not p.reserved:
            yield Found(f"{where}.capacityType", p.capacity_type,
                        "capacity reservations are listed but capacityType is not reserved",
                        "set capacityType: reserved (On-Demand Capacity Reservations) or capacity-block (Capacity "
                        "Blocks for ML), or remove capacityReservationIds")


# The catalog's types that EC2 sells as Capacity Blocks for ML ("Capacity Blocks are currently available for
# p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p4d.24xlarge, trn1.32xlarge, and trn2.48xlarge instances",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html, Supported instance types and
# Regions). AWS adds types over time: extend this set from that page when the catalog gains one.
CAPACITY_BLOCK_TYPES = frozenset({"p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "trn1.32xlarge",
                                  "trn2.48xlarge"})


@rule("capacity-block")
def capacity_block(c: ClusterConfig) -> Iterator[Found]:
    """A Capacity Block is a reservation of one instance type in one zone (delivered as a targeted capacity
    reservation in a single Availability Zone: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    capacity-blocks-using.html). So the group has one type, one EC2 sells as blocks. The zone: an EFA group is pinned
    to network.efaAvailabilityZone (rule efa-zone; preflight checks each block is there); a group without EFA is
    pinned by its blocks alone, since Karpenter offers reserved capacity only in the reservation's zone
    (aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/offering/reserved_capacity_resolver.go), and
    preflight checks that the VPC has a subnet in each block's zone."""
    for where, p in node_groups(c):
        if p.capacity_type != "capacity-block":
            continue
        if len(p.instance_types) != 1:
            yield Found(f"{where}.instanceTypes", p.instance_types,
                        "a Capacity Block holds instances of one type: the other types could never launch",
                        f"keep the block's type only (instanceTypes: [{p.instance_types[0]}]), or split the types "
                        "into partitions with a block each")
        for i, t in enumerate(p.instance_types):
            if t in catalog.CATALOG and t not in CAPACITY_BLOCK_TYPES:
                yield Found(f"{where}.instanceTypes[{i}]", t, "EC2 sells no Capacity Blocks of this type",
                            f"use one of {', '.join(sorted(CAPACITY_BLOCK_TYPES))}, or capacityType on-demand "
                            "or reserved")


@rule("default-partition")
def default_partition(c: ClusterConfig) -> Iterator[Found]:
    marked = [name for name, p in c.partitions.items() if p.default]
    if len(marked) > 1:
        yield Found("partitions", marked, "more than one partition has default: true",
                    "mark exactly one partition default: true")
    if not marked and len(c.partitions) > 1:
        yield Found("partitions", list(c.partitions), "no partition has default: true",
                    "mark the partition that sbatch uses without -p as default: true")
