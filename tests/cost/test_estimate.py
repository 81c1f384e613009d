"""The estimate: node groups at minNodes and maxNodes, the fixed part from the plan's resources, and prices that
are missing named instead of counted as free."""

from __future__ import annotations

import pytest

from scripts.cost.estimate import HOURS_PER_MONTH, estimate
from scripts.cost.price_table import PriceTable
from tests.cost.plans import group, plan, resource, table
from tests.plan.fixtures import shipped_plan


def test_partition_costs_max_nodes_at_most_and_min_nodes_idle() -> None:
    e = estimate(plan(partitions={"gpu": group(["p5.48xlarge"], 2, 8)}), table())
    (line,) = e.lines
    assert (line.idle, line.max) == pytest.approx((2 * 55.04, 8 * 55.04))
    assert (e.total("idle"), e.total("max")) == pytest.approx((110.08, 440.32))


def test_several_types_are_priced_at_the_dearest() -> None:
    # Karpenter may launch either type: the dearer one bounds what the partition can cost.
    (line,) = estimate(plan(partitions={"a": group(["p4d.24xlarge", "p5.48xlarge"], 0, 2)}), table()).lines
    assert line.max == pytest.approx(2 * 55.04) and line.sources == ("k",)
    assert line.note == "priced as p5.48xlarge, the dearest of the types"  # the table says which type it priced
    (spot,) = estimate(plan(partitions={"a": group(["p4d.24xlarge", "p5.48xlarge"], 0, 2, "spot")}), table()).lines
    assert spot.note.startswith("priced as p5.48xlarge, the dearest of the types; spot: ")


def test_a_missing_price_is_named_never_counted_as_free() -> None:
    e = estimate(plan(partitions={"a": group(["p4d.24xlarge", "trn2.48xlarge"], 0, 2)}), table())
    (line,) = e.lines
    assert (line.idle, line.max) == (None, None)
    assert e.missing == ["trn2.48xlarge in us-east-1"]


def test_capacity_blocks_are_prepaid_and_spot_is_bounded_by_on_demand() -> None:
    e = estimate(plan(partitions={"cb": group(["p5.48xlarge"], 0, 4, "capacity-block"),
                                  "sp": group(["p5.48xlarge"], 0, 1, "spot")}), table())
    cb, sp = e.lines
    assert (cb.idle, cb.max) == (0.0, 0.0) and "up front" in cb.note
    assert sp.max == pytest.approx(55.04) and "spot" in sp.note


def test_fixed_part_from_the_plan_resources() -> None:
    resources = [
        resource("eks:index:Cluster", "eks"),
        *(resource("aws:ec2/natGateway:NatGateway", f"nat-{i}") for i in range(3)),
        resource("eks:index:ManagedNodeGroup", "login", instanceTypes=["m7i.large"],
                 scalingConfig={"minSize": 1, "maxSize": 2, "desiredSize": 1}),
        resource("aws:fsx/lustreFileSystem:LustreFileSystem", "fsx", storageCapacity=4800,
                 deploymentType="PERSISTENT_2", perUnitStorageThroughput=250),
        resource("aws:rds/instance:Instance", "db", engine="mariadb", instanceClass="db.t4g.medium",
                 multiAz=False, allocatedStorage=50, storageType="gp3"),
        resource("kubernetes:slinky.slurm.net/v1beta1:LoginSet", "login",
                 spec={"service": {"spec": {"type": "LoadBalancer"}}}),
        resource("kubernetes:core/v1:Service", "internal", spec={"type": "ClusterIP"}),
    ]
    prices = table(natGatewayHour=0.045, nlbHour=0.0225, **{"fsxGbMonth__PERSISTENT_2__250": 0.21,
                                                           "rdsHour__mariadb__db.t4g.medium__single-az": 0.07,
                                                           "rdsStorageGbMonth__gp3__single-az": 0.115})
    lines = {line.name: line for line in estimate(plan(resources=resources), prices).lines}
    assert lines["EKS control plane"].max == pytest.approx(0.10)
    assert lines["NAT gateways"].max == pytest.approx(3 * 0.045)
    assert (lines["node group login"].idle, lines["node group login"].max) == pytest.approx((0.1008, 0.2016))
    assert lines["FSx for Lustre fsx"].max == pytest.approx(4800 * 0.21 / HOURS_PER_MONTH)
    assert lines["RDS db"].max == pytest.approx(0.07)
    assert lines["RDS db storage"].max == pytest.approx(50 * 0.115 / HOURS_PER_MONTH)
    assert lines["Network Load Balancers"].what == "1 x NLB"  # the LoginSet's; a ClusterIP Service is none


def test_prod_plan_prices_every_partition_and_names_the_gaps() -> None:
    prod = shipped_plan("prod")
    e = estimate(prod, PriceTable.load())
    by_name = {line.name: line for line in e.lines}
    assert {"gpu-h100", "gpu-a100", "trainium", "ml-h100"} <= by_name.keys()
    assert by_name["gpu-h100"].max == pytest.approx(8 * 55.04)  # 8 x p5.48xlarge, us-west-2
    assert by_name["NAT gateways"].what == "3 x NAT gateway"  # one per zone
    assert by_name["Network Load Balancers"].what == "2 x NLB"  # login and JupyterHub
    assert e.missing == [] and all(line.max is not None for line in e.lines)  # prod is priced whole


def test_a_size_the_plan_does_not_know_is_named() -> None:
    fsx = resource("aws:fsx/lustreFileSystem:LustreFileSystem", "fsx", storageCapacity="[unknown]",
                   deploymentType="SCRATCH_2")
    (line,) = estimate(plan(resources=[fsx, resource("aws:rds/instance:Instance", "db")]), table()).lines[:1]
    assert line.max is None and line.missing == ("the size of fsx (not in the plan)",)
