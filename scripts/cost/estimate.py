"""What a plan costs per hour: each partition and Kubernetes pool at maxNodes and at minNodes, and the fixed part
(EKS control plane, NAT gateways, managed node groups, FSx, the RDS database, NLBs) that runs whatever Slurm does.

Everything is read from the offline plan (scripts/offline/plan_model.py), so the base and head revisions of a pull
request are priced the same way: the fixed part from the resources the plan registers, the node groups from the
program's `nodeGroups` output (components/program.py). Monthly prices become hourly over 730 hours (8760 / 12,
our convention for an average month). Usage-priced items (data transfer, NLB capacity units, EFS storage, S3)
are listed as not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from scripts.cost.price_table import Price, PriceTable
from scripts.offline.plan_model import Plan, PlannedResource

HOURS_PER_MONTH = 730
NODE_GROUPS_OUTPUT = "nodeGroups"


@dataclass(frozen=True)
class Line:
    group: str  # "partition", "pool" or "fixed"
    name: str
    what: str  # "8 x p5.48xlarge", "4800 GiB PERSISTENT_2 at 250 MB/s/TiB"
    idle: float | None  # $/hour with minNodes; None: a price is missing
    max: float | None  # $/hour at maxNodes
    sources: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()  # "p5e.48xlarge in us-west-2"
    note: str = ""


@dataclass(frozen=True)
class Estimate:
    region: str
    lines: list[Line]
    not_counted: list[str] = field(default_factory=list)
    # False: the plan predates the `nodeGroups` output, so its partitions and pools are not priced.
    has_node_groups: bool = True

    def total(self, attr: str, group: str | None = None) -> float:
        return sum(getattr(line, attr) or 0.0 for line in self.lines if group in (None, line.group))

    @property
    def missing(self) -> list[str]:
        return sorted({m for line in self.lines for m in line.missing})


def _priced(prices: list[tuple[str, Price | None]]) -> tuple[list[Price], tuple[str, ...]]:
    return [p for _, p in prices if p], tuple(what for what, p in prices if p is None)


def _line(group: str, name: str, what: str, idle_units: float, max_units: float,
          prices: list[tuple[str, Price | None]], note: str = "") -> Line:
    """A line whose hourly cost is units x the highest of `prices` (several instance types: Karpenter may launch
    any of them, so the most expensive bounds the cost)."""
    found, missing = _priced(prices)
    if missing or not found:
        return Line(group, name, what, None, None, tuple(sorted({p.source for p in found})), missing, note)
    top = max(found, key=lambda p: p.usd)
    if len(found) > 1:  # say which type the figures are for
        label = next(what for what, p in prices if p is top).split(" in ")[0]
        note = "; ".join(filter(None, (f"priced as {label}, the dearest of the types", note)))
    return Line(group, name, what, idle_units * top.usd, max_units * top.usd, (top.source,), (), note)


CAPACITY_NOTES = {
    "spot": "spot: pays the spot price, at most the on-demand price shown",
    "reserved": "capacity reservation: billed at this rate for every reserved instance, running or not",
    "capacity-block": "Capacity Block: the reservation fee is paid up front; no hourly instance charge",
}


def node_group_lines(plan: Plan, table: PriceTable, region: str) -> Iterator[Line]:
    groups = plan.outputs.get(NODE_GROUPS_OUTPUT) or {}
    for kind, group in (("partitions", "partition"), ("kubernetesPools", "pool")):
        for name, g in (groups.get(kind) or {}).items():
            types, capacity = g["instanceTypes"], g["capacityType"]
            what = f"{g['minNodes']}-{g['maxNodes']} x {' | '.join(types)}"
            if capacity == "capacity-block":
                yield Line(group, name, what, 0.0, 0.0, note=CAPACITY_NOTES[capacity])
                continue
            prices = [_instance(table, region, t) for t in types]
            yield _line(group, name, what, g["minNodes"], g["maxNodes"], prices, CAPACITY_NOTES.get(capacity, ""))


def _count(plan: Plan, type_: str) -> int:
    return len(plan.of_type(type_))


def _load_balancers(value: Any) -> int:
    """Service specs of type LoadBalancer anywhere in an input (a Service, a LoginSet's service, Helm values):
    each is one NLB (the AWS Load Balancer Controller's `aws-load-balancer-type: nlb`, or the in-tree one)."""
    if isinstance(value, dict):
        own = int(value.get("type") == "LoadBalancer")
        return own + sum(_load_balancers(v) for v in value.values())
    if isinstance(value, list):
        return sum(_load_balancers(v) for v in value)
    return 0


def _fsx(r: PlannedResource) -> tuple[str, str]:
    i = r.inputs
    throughput = i.get("perUnitStorageThroughput")
    key = f"fsxGbMonth:{i['deploymentType']}" + (f":{throughput}" if throughput else "")
    what = f"{i['storageCapacity']} GiB {i['deploymentType']}" + (f" at {throughput} MB/s/TiB" if throughput else "")
    return key, what


def _instance(table: PriceTable, region: str, instance_type: str) -> tuple[str, Price | None]:
    return f"{instance_type} in {region}", table.instance_hour(region, instance_type)


def _item(table: PriceTable, region: str, key: str) -> tuple[str, Price | None]:
    """A priced item and what to call it when the table has no price for it."""
    return f"{key} in {region}", table.item(region, key)


def _resource_lines(r: PlannedResource, table: PriceTable, region: str) -> Iterator[Line]:
    i = r.inputs
    if r.type == "eks:index:ManagedNodeGroup":
        size, types = i["scalingConfig"], i["instanceTypes"]
        yield _line("fixed", f"node group {r.name}", f"{size['minSize']}-{size['maxSize']} x {' | '.join(types)}",
                    size["minSize"], size["maxSize"], [_instance(table, region, t) for t in types])
    elif r.type == "aws:fsx/lustreFileSystem:LustreFileSystem":
        key, what = _fsx(r)
        gib = i["storageCapacity"] / HOURS_PER_MONTH
        yield _line("fixed", f"FSx for Lustre {r.name}", what, gib, gib, [_item(table, region, key)])
    elif r.type == "aws:rds/instance:Instance":
        az = "multi-az" if i.get("multiAz") else "single-az"
        storage = i["allocatedStorage"] / HOURS_PER_MONTH
        yield _line("fixed", f"RDS {r.name}", f"{i['engine']} {i['instanceClass']} {az}", 1, 1,
                    [_item(table, region, f"rdsHour:{i['engine']}:{i['instanceClass']}:{az}")])
        yield _line("fixed", f"RDS {r.name} storage", f"{i['allocatedStorage']} GiB {i['storageType']}",
                    storage, storage, [_item(table, region, f"rdsStorageGbMonth:{i['storageType']}:{az}")])


SIZED = ("eks:index:ManagedNodeGroup", "aws:fsx/lustreFileSystem:LustreFileSystem", "aws:rds/instance:Instance")


def fixed_lines(plan: Plan, table: PriceTable, region: str) -> Iterator[Line]:
    if clusters := _count(plan, "eks:index:Cluster"):
        yield _line("fixed", "EKS control plane", f"{clusters} cluster", clusters, clusters,
                    [_item(table, region, "eksClusterHour")])
    if nat := _count(plan, "aws:ec2/natGateway:NatGateway"):
        yield _line("fixed", "NAT gateways", f"{nat} x NAT gateway", nat, nat, [_item(table, region, "natGatewayHour")],
                    "data processed per GB not counted")
    for r in (r for r in plan.resources if r.type in SIZED):
        try:
            yield from list(_resource_lines(r, table, region))
        except (KeyError, TypeError, ValueError):  # a size the plan does not know ("[unknown]" or absent)
            yield Line("fixed", r.name, r.type, None, None, missing=(f"the size of {r.name} (not in the plan)",))
    if nlbs := sum(_load_balancers(r.inputs) for r in plan.resources):
        yield _line("fixed", "Network Load Balancers", f"{nlbs} x NLB", nlbs, nlbs, [_item(table, region, "nlbHour")],
                    "capacity units (LCU) not counted")


class _KeyRecorder(PriceTable):
    """A price table that knows no price and remembers every item key it was asked for."""

    def __init__(self) -> None:
        super().__init__({"sources": {}, "global": {}, "regions": {}})
        self.keys: set[str] = set()

    def item(self, region: str, key: str) -> Price | None:
        self.keys.add(key)
        return None


def item_keys(plan: Plan) -> set[str]:
    """The table keys the fixed part of `plan` is priced with: what `cost --refresh` asks the Price List for."""
    recorder = _KeyRecorder()
    list(fixed_lines(plan, recorder, plan.outputs["region"]))  # run for the lookups it makes
    return recorder.keys


def not_counted(plan: Plan) -> list[str]:
    out = ["data transfer"]
    if plan.of_type("aws:efs/fileSystem:FileSystem"):
        out.append("EFS storage (billed per GB stored)")
    if plan.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        out.append("S3 behind FSx data repositories")
    return out


def estimate(plan: Plan, table: PriceTable) -> Estimate:
    region = plan.outputs["region"]
    lines = [*node_group_lines(plan, table, region), *fixed_lines(plan, table, region)]
    return Estimate(region, lines, not_counted(plan), NODE_GROUPS_OUTPUT in plan.outputs)
