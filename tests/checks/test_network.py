"""The deploy check's network rule: the shipped stacks pass, and each broken flow is named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pulumi_eks
import pytest

from components.config.cluster import ClusterConfig
from components.config.stackfile import load_stack
from components.findings import Finding
from components.slinky.slurm_conf import SRUN_PORT_RANGE
from scripts.checks import network
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan, PlannedResource
from scripts.offline.security_groups import (
    INGRESS_RULE,
    SECURITY_GROUP,
    Rule,
    SecurityGroup,
    node_security_groups,
    security_groups,
)
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, plan_of

SRUN_RANGE = "{}-{}".format(*SRUN_PORT_RANGE)


def config(stack: str) -> ClusterConfig:
    return load_stack(stack)[0]


def labels(findings: list[Finding]) -> set[str]:
    return {f.resource for f in findings}


def broken(stack: str, change: Callable[[Plan], None]) -> Plan:
    plan = copy.deepcopy(shipped_plan(stack))
    change(plan)
    return plan


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_pass(stack: str) -> None:
    plan = shipped_plan(stack)
    assert network.check(plan, config(stack)) == []
    # Not vacuous: every node kind, the database and FSx take part in flows.
    t = network.topology(plan)
    flows = list(network.flows(t, config(stack)))
    assert len(flows) > 20 and {f.whom.name for f in flows} >= {"the EKS control plane", "FSx for Lustre"}


def test_every_node_carries_the_group_eks_creates() -> None:
    plan = shipped_plan("prod")
    eks_group = next(m["id"] for m in plan.modelled if m["name"] == "eks-cluster-sg-ml-training-prod")
    assert plan.nodes == {
        "control-plane": [eks_group], "managed-node-group/eks-system": [eks_group],
        "managed-node-group/eks-login": [eks_group],
        "ec2nodeclass/gpu-a100": [eks_group], "ec2nodeclass/gpu-h100": [eks_group],
        "ec2nodeclass/trainium": [eks_group], "ec2nodeclass/ml-h100": [eks_group],
        "ec2nodeclass/ml-a10g": [eks_group], "ec2nodeclass/ml-trn1": [eks_group]}


def test_the_login_nodes_are_their_own_endpoint_for_srun_and_step_io() -> None:
    def login_on_a_bare_group(plan: Plan) -> None:
        plan.nodes["managed-node-group/eks-login"] = ["sg-0login"]

    t = network.topology(shipped_plan("prod"))
    assert t.login is not None and t.slurm_clients is t.login
    found = labels(network.check(broken("prod", login_on_a_bare_group), config("prod")))
    assert {"the login nodes -> Karpenter nodes of gpu-h100 (tcp 6818)",
            f"Karpenter nodes of gpu-h100 -> the login nodes (tcp {SRUN_RANGE})",
            "the login nodes -> the system nodes (tcp 6817)",
            f"the system nodes -> the login nodes (tcp {SRUN_RANGE})"} <= found
    # The system nodes keep only what slurmctld needs of the partitions.
    assert "the system nodes -> Karpenter nodes of gpu-h100 (tcp 6818)" not in found


def test_pulumi_eks_default_groups_break_node_to_api_dns_efa_and_storage(monkeypatch: pytest.MonkeyPatch) -> None:
    # The defect of the first version: pulumi-eks's own control-plane group, which Karpenter's nodes then
    # join through the discovery tag while the system nodes carry the EKS group.
    real = pulumi_eks.Cluster

    def with_default_groups(*args: object, **kwargs: object) -> pulumi_eks.Cluster:
        return real(*args, **{**kwargs, "skip_default_security_groups": False})

    monkeypatch.setattr(pulumi_eks, "Cluster", with_default_groups)
    plan, _ = run_plan("prod")
    found = labels(network.check(plan, config("prod")))
    for flow in ("Karpenter nodes of gpu-h100 -> the EKS control plane (tcp 443)",
                 "the EKS control plane -> Karpenter nodes of gpu-h100 (tcp 10250)",
                 "Karpenter nodes of gpu-h100 -> the system nodes (udp 53)",
                 "the system nodes -> FSx for Lustre (tcp 988)",
                 "the system nodes -> slurmdbd's database (RDS) (tcp 3306)",
                 "the system nodes -> Karpenter nodes of trainium (tcp 6818)"):
        assert flow in found


def test_efa_needs_all_traffic_to_and_from_the_group_itself() -> None:
    def drop_self_egress(plan: Plan) -> None:
        eks = next(m for m in plan.modelled if m["name"].startswith("eks-cluster-sg-"))
        eks["inputs"]["egress"] = [e for e in eks["inputs"]["egress"] if not e.get("self")]

    found = network.check(broken("prod", drop_self_egress), config("prod"))
    # The 0.0.0.0/0 egress still carries TCP and UDP, but EFA's traffic is matched by group only.
    assert labels(found) == {f"Karpenter nodes of {p} -> Karpenter nodes of {p} (all traffic)"
                             for p in ("gpu-a100", "gpu-h100", "trainium", "ml-h100")}
    assert "no egress rule" in found[0].message


def test_a_missing_database_rule_names_the_flow() -> None:
    def drop_rds_rule(plan: Plan) -> None:
        plan.resources = [r for r in plan.resources if not (r.type == INGRESS_RULE and r.name == "slurm-db-from-nodes")]

    assert any(r.name == "slurm-db-from-nodes" for r in shipped_plan("prod").of_type(INGRESS_RULE))
    found = network.check(broken("prod", drop_rds_rule), config("prod"))
    assert labels(found) == {"the system nodes -> slurmdbd's database (RDS) (tcp 3306)"}


def test_lustre_callbacks_from_the_servers_to_their_clients() -> None:
    def drop_callbacks(plan: Plan) -> None:
        plan.resources = [r for r in plan.resources if "nodes-from-fsx" not in r.name]

    found = labels(network.check(broken("prod", drop_callbacks), config("prod")))
    assert "FSx for Lustre -> the system nodes (tcp 1018-1023)" in found
    assert "FSx for Lustre -> Karpenter nodes of gpu-h100 (tcp 988)" in found


def test_deployer_must_reach_the_endpoint() -> None:
    def private_only(plan: Plan) -> None:
        (cluster,) = plan.of_type("eks:index:Cluster")
        cluster.inputs["endpointPublicAccess"] = False

    found = network.check(broken("prod", private_only), config("prod"))
    assert [f.resource for f in found] == ["the deployer (pulumi up) -> the EKS API endpoint (tcp 443)"]
    assert "203.0.113.0/24" in found[0].message


def test_an_in_vpc_deployer_needs_a_rule_on_the_control_plane_group() -> None:
    cfg = config("prod").model_copy(update={"network": config("prod").network.model_copy(
        update={"deployer": config("prod").network.deployer.model_copy(update={"via": "vpc"})})})
    t = network.topology(shipped_plan("prod"))
    assert [f.resource for f in network.deployer_findings(shipped_plan("prod"), t, cfg)] == [
        "the deployer (pulumi up) -> the EKS control plane (tcp 443)"]


def test_login_load_balancer_needs_exactly_one_cluster_tagged_group_per_node() -> None:
    def second_tagged_group(plan: Plan) -> None:
        extra = copy.deepcopy(next(m for m in plan.modelled if m["name"].startswith("eks-cluster-sg-")))
        extra.update(id="sg-0second", name="another-cluster-group", role=[])
        plan.modelled.append(extra)
        plan.nodes["managed-node-group/eks-system"].append("sg-0second")

    found = labels(network.check(broken("prod", second_tagged_group), config("prod")))
    assert found == {"the login NLB -> the system nodes (tcp 22 via the NodePort)"}


# The pieces the rule stands on.

def _plan(*resources: PlannedResource, modelled: list[dict] | None = None) -> Plan:
    return Plan(stack="t", project="slurm-eks", resources=list(resources), modelled=modelled or [])


def _res(type_: str, name: str, inputs: dict, rid: str | None = None) -> PlannedResource:
    return PlannedResource(urn=f"urn:pulumi:t::slurm-eks::{type_}::{name}", type=type_, name=name, parent=None,
                           provider=None, dependencies=[], custom=True, protect=False, retain_on_delete=False,
                           inputs=inputs, id=rid)


def test_rules_from_inline_blocks_standalone_rules_and_tags() -> None:
    plan = _plan(
        _res(SECURITY_GROUP, "a", {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                                "cidrBlocks": ["10.0.0.0/8"], "self": True}]}, "sg-a"),
        _res(INGRESS_RULE, "r", {"securityGroupId": "sg-a", "ipProtocol": "udp", "fromPort": 53, "toPort": 53,
                                 "referencedSecurityGroupId": "sg-b"}),
        _res("aws:ec2/tag:Tag", "t", {"resourceId": "sg-a", "key": "karpenter.sh/discovery", "value": "c"}),
    )
    (group,) = security_groups(plan).values()
    assert group.tags == {"karpenter.sh/discovery": "c"}
    assert {(r.direction, r.protocol, r.from_port, r.peer_group, r.cidr) for r in group.rules} == {
        ("ingress", "tcp", 22, "sg-a", None), ("ingress", "tcp", 22, None, "10.0.0.0/8"),
        ("ingress", "udp", 53, "sg-b", None)}
    # pulumi-aws removes the egress rule EC2 adds: a group written without egress lets nothing out.
    assert group.rules_of("egress") == []


def test_node_class_selectors_match_by_every_tag_of_a_term() -> None:
    node_class = _res("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "nc", {
        "metadata": {"name": "gpu"}, "spec": {"securityGroupSelectorTerms": [{"tags": {"a": "1", "b": "*"}}]}})
    plan = _plan(_res(SECURITY_GROUP, "both", {"tags": {"a": "1", "b": "x"}}, "sg-both"),
                 _res(SECURITY_GROUP, "one", {"tags": {"a": "1"}}, "sg-one"), node_class)
    assert node_security_groups(plan)["ec2nodeclass/gpu"] == ["sg-both"]


def _topology(*rules: Rule) -> tuple[network.Topology, network.Endpoint, network.Endpoint]:
    groups = {"sg-a": SecurityGroup("sg-a", "a", "test", rules=[r for r in rules if r.direction == "egress"]),
              "sg-b": SecurityGroup("sg-b", "b", "test", rules=[r for r in rules if r.direction == "ingress"])}
    a, b = network.Endpoint("a", ("sg-a",)), network.Endpoint("b", ("sg-b",))
    return network.Topology(groups, a, a, None, {}, None, None), a, b


@pytest.mark.parametrize(("ingress", "passes"), [
    ([Rule("ingress", "tcp", 0, 1024, peer_group="sg-a"), Rule("ingress", "tcp", 1025, 65535, peer_group="sg-a")],
     True),
    ([Rule("ingress", "tcp", 0, 1023, peer_group="sg-a"), Rule("ingress", "tcp", 1025, 65535, peer_group="sg-a")],
     False),  # port 1024 is not covered
    ([Rule("ingress", "udp", 0, 65535, peer_group="sg-a")], False),
    ([Rule("ingress", "tcp", 0, 65535, peer_group="sg-other")], False),
])
def test_port_ranges_must_be_covered_whole(ingress: list[Rule], passes: bool) -> None:
    t, a, b = _topology(*ingress, Rule("egress", "-1", 0, 65535, cidr="0.0.0.0/0"))
    flow = network.Flow(a, b, "tcp", (0, 65535), "test")
    assert (network.evaluate(t, flow) is None) is passes


def test_all_traffic_needs_an_all_traffic_rule_by_group() -> None:
    tcp_only = _topology(Rule("ingress", "tcp", 0, 65535, peer_group="sg-a"),
                         Rule("egress", "-1", 0, 65535, peer_group="sg-b"))
    by_address = _topology(Rule("ingress", "-1", 0, 65535, peer_group="sg-a"),
                           Rule("egress", "-1", 0, 65535, cidr="0.0.0.0/0"))
    by_group = _topology(Rule("ingress", "-1", 0, 65535, peer_group="sg-a"),
                         Rule("egress", "-1", 0, 65535, peer_group="sg-b"))
    for (t, a, b), passes in ((tcp_only, False), (by_address, False), (by_group, True)):
        flow = network.Flow(a, b, "-1", (0, 65535), "EFA", by_group_only=True)
        assert (network.evaluate(t, flow) is None) is passes


def test_a_public_deployer_opens_the_public_endpoint_to_its_range_only() -> None:
    (cluster,) = shipped_plan("prod").of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is True and cluster.inputs["endpointPrivateAccess"] is True
    assert cluster.inputs["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert cluster.inputs["skipDefaultSecurityGroups"] is True


def test_an_in_vpc_deployer_gets_443_on_the_cluster_group_and_passes(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["network"] = {"vpcId": "vpc-0runner", "privateSubnetIds": ["subnet-a", "subnet-b", "subnet-c"],
                      "efaAvailabilityZone": "us-west-2a", "deployer": {"via": "vpc", "cidrs": ["10.9.8.0/24"]}}
    plan = plan_of(raw, tmp_path)
    (cluster,) = plan.of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is False
    (rule,) = [r for r in plan.of_type(INGRESS_RULE) if "deployer" in r.name]
    assert (rule.inputs["cidrIpv4"], rule.inputs["fromPort"]) == ("10.9.8.0/24", 443)
    assert network.check(plan, config_of(raw)) == []


def _table(stack: str, node_name: str) -> list[tuple[str, str, str, tuple[int, int], bool]]:
    t = network.topology(shipped_plan(stack))
    return [(f.who.name, f.whom.name, f.protocol, f.ports, f.by_group_only) for f in network.flows(t, config(stack))
            if node_name in (f.who.name, f.whom.name)
            and not any(storage in f.who.name + f.whom.name for storage in ("FSx", "EFS"))]


def test_flow_table_names_the_documented_ports_of_efa_partitions_and_webhooks() -> None:
    h100, cp, system, login = ("Karpenter nodes of gpu-h100", "the EKS control plane", "the system nodes",
                               "the login nodes")
    assert [row for row in _table("prod", h100) if row[0] not in (system, login) or row[1] == h100] == [
        (h100, cp, "tcp", (443, 443), False), (cp, h100, "tcp", (10250, 10250), False),
        (h100, system, "udp", (53, 53), False), (h100, system, "tcp", (53, 53), False),
        (h100, h100, "-1", (0, 65535), True), (system, h100, "tcp", (6818, 6818), False),
        (system, h100, "tcp", SRUN_PORT_RANGE, False),  # srun in a batch script, called back by slurmctld
        (login, h100, "tcp", (6818, 6818), False), (h100, system, "tcp", (6817, 6817), False),
        (h100, login, "tcp", SRUN_PORT_RANGE, False)]
    assert [row for row in _table("prod", system) if row[0] == cp] == [
        (cp, system, "tcp", (10250, 10250), False), (cp, system, "tcp", (10250, 10250), False),
        (cp, system, "tcp", (9443, 9443), False), (cp, system, "tcp", (9443, 9443), False)]
    whys = [f.why for f in network.flows(network.topology(shipped_plan("prod")), config("prod"))
            if f.who.name == cp and f.whom.name == system]
    assert whys[1:] == [f"the API server calls the {w} on the system nodes"
                        for w in ("cert-manager webhook", "slurm-operator webhook", "KEDA admission webhook")]


def test_flow_table_gives_a_partition_without_efa_all_tcp_between_its_nodes() -> None:
    gpu = "Karpenter nodes of gpu"
    assert [row for row in _table("dev", gpu) if row[0] == row[1] == gpu] == [(gpu, gpu, "tcp", (0, 65535), False)]


def test_endpoints_and_flows_are_immutable() -> None:
    import dataclasses
    a = network.Endpoint("a", ("sg-a",))
    flow = network.Flow(a, a, "tcp", (443, 443), "test")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        flow.protocol = "udp"  # type: ignore[misc]


def test_a_tcp_rule_does_not_admit_a_udp_flow() -> None:
    t, a, b = _topology(Rule("ingress", "tcp", 53, 53, peer_group="sg-a"),
                        Rule("egress", "-1", 0, 65535, cidr="0.0.0.0/0"))
    found = network.evaluate(t, network.Flow(a, b, "udp", (53, 53), "DNS"))
    assert found is not None and found.resource == "a -> b (udp 53)"


def test_an_address_rule_admits_only_senders_inside_its_block() -> None:
    groups = {"sg-b": SecurityGroup("sg-b", "b", "test", rules=[Rule("ingress", "tcp", 443, 443, cidr="10.1.0.0/16")])}
    b = network.Endpoint("b", ("sg-b",))
    t = network.Topology(groups, b, b, None, {}, None, None)
    outside = network.Endpoint("deployer", cidrs=("10.2.0.0/24",), external=True)
    inside = network.Endpoint("deployer", cidrs=("10.1.4.0/24",), external=True)
    found = network.evaluate(t, network.Flow(outside, b, "tcp", (443, 443), "pulumi up"))
    assert found == Finding(
        rule="network", severity="error", resource="deployer -> b (tcp 443)",
        message="pulumi up; no ingress rule of b's groups [b (sg-b)] admits it from deployer [10.2.0.0/24]",
        fix="give both the same group, or add an ingress rule for deployer -> b (tcp 443)")
    assert network.evaluate(t, network.Flow(inside, b, "tcp", (443, 443), "pulumi up")) is None


def test_a_missing_ingress_rule_names_both_sides_groups() -> None:
    t, _, b = _topology(Rule("egress", "-1", 0, 65535, cidr="0.0.0.0/0"))
    unknown = network.Endpoint("c", ("sg-gone",))
    found = network.evaluate(t, network.Flow(unknown, b, "tcp", (6818, 6818), "slurmctld reaches slurmd"))
    assert found is not None and found.message == (
        "slurmctld reaches slurmd; no ingress rule of b's groups [b (sg-b)] admits it from c [sg-gone]")


def test_a_public_endpoint_without_cidrs_admits_every_public_deployer() -> None:
    def open_to_all(plan: Plan) -> None:
        (cluster,) = plan.of_type("eks:index:Cluster")
        del cluster.inputs["publicAccessCidrs"]

    plan = broken("prod", open_to_all)
    assert list(network.deployer_findings(plan, network.topology(plan), config("prod"))) == []


def _nodes_with(*groups: SecurityGroup, carried: tuple[str, ...]) -> network.Topology:
    nodes = network.Endpoint("the system nodes", carried)
    return network.Topology({g.id: g for g in groups}, nodes, nodes, None, {}, None, None)


TAG = "kubernetes.io/cluster/ml-training-prod"


@pytest.mark.parametrize(("carried", "fails"), [
    (("sg-untagged",), False),  # the only group gets the rules
    (("sg-untagged", "sg-other"), True),  # several, none tagged
    (("sg-tagged", "sg-untagged"), False),  # the tagged one gets them
    (("sg-tagged", "sg-unknown"), False),
    ((), True),  # no group at all: nowhere to add the rules
])
def test_login_load_balancer_picks_the_tagged_group_else_the_only_one(carried: tuple[str, ...], fails: bool) -> None:
    t = _nodes_with(SecurityGroup("sg-tagged", "cluster", "test", tags={TAG: "owned"}),
                    SecurityGroup("sg-untagged", "nodes", "test"), SecurityGroup("sg-other", "extra", "test"),
                    carried=carried)
    found = list(network.login_load_balancer_findings(t, config("prod"), "ml-training-prod"))
    label = "the login NLB -> the system nodes (tcp 22 via the NodePort)"
    assert [f.resource for f in found] == ([label] if fails else [])
