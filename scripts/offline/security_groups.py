"""The security groups a plan will create, with every rule that lands in them, and which groups each kind
of node carries.

Rules come from the groups' inline `ingress`/`egress`, from `aws.vpc.SecurityGroupIngressRule`/
`EgressRule` and `aws.ec2.SecurityGroupRule` resources, and from the groups AWS or pulumi-eks create
(`Plan.modelled`). A group created by pulumi-aws without `egress` has no egress rule: the provider
deletes the allow-all rule EC2 adds (hashicorp/terraform-provider-aws
website/docs/r/security_group.html.markdown, "NOTE on Egress rules").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from scripts.offline.plan_model import Plan

Direction = Literal["ingress", "egress"]
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LEGACY_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
TAG = "aws:ec2/tag:Tag"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
CONTROL_PLANE = "control-plane"
_PROTOCOLS = {"6": "tcp", "17": "udp", "1": "icmp", "all": "-1"}


@dataclass(frozen=True)
class Rule:
    direction: Direction
    protocol: str  # "-1" (all), "tcp", "udp", "icmp"
    from_port: int
    to_port: int
    peer_group: str | None = None  # the other side, a security group ...
    cidr: str | None = None  # ... or an address block
    origin: str = ""  # the resource that makes the rule

    def admits_address(self, cidr: str) -> bool:
        """Every address of `cidr` lies in this rule's block."""
        return self.cidr is not None and cidr_within(cidr, self.cidr)


def cidr_within(inner: str, outer: str) -> bool:
    """Every address of `inner` lies in `outer`."""
    a, b = ipaddress.ip_network(inner), ipaddress.ip_network(outer)
    return a.version == b.version and a.subnet_of(b)  # type: ignore[arg-type]


@dataclass
class SecurityGroup:
    id: str
    name: str
    origin: str  # the URN that creates it, or what the model is based on
    tags: dict[str, str] = field(default_factory=dict)
    rules: list[Rule] = field(default_factory=list)

    def rules_of(self, direction: Direction) -> list[Rule]:
        return [r for r in self.rules if r.direction == direction]


def security_groups(plan: Plan) -> dict[str, SecurityGroup]:
    """Every group of the plan (created or modelled), by ID, with all its rules and tags."""
    groups: dict[str, SecurityGroup] = {}
    for entry in plan.modelled:
        if entry["type"] == SECURITY_GROUP:
            groups[entry["id"]] = _group(entry["id"], entry["name"], entry["createdBy"], entry["inputs"])
    for r in plan.of_type(SECURITY_GROUP):
        if r.id:
            groups[r.id] = _group(r.id, r.inputs.get("name") or r.name, r.urn, r.inputs)
    for r in plan.of_type(TAG):
        if r.inputs.get("resourceId") in groups:
            groups[r.inputs["resourceId"]].tags[r.inputs["key"]] = r.inputs["value"]
    for r in [*plan.of_type(INGRESS_RULE), *plan.of_type(EGRESS_RULE), *plan.of_type(LEGACY_RULE)]:
        target = groups.get(str(r.inputs.get("securityGroupId")))
        if target is not None:
            target.rules.extend(_standalone_rules(r.type, r.inputs, target.id, r.urn))
    return groups


def _group(gid: str, name: str, origin: str, inputs: Mapping[str, Any]) -> SecurityGroup:
    group = SecurityGroup(gid, name, origin, tags=dict(inputs.get("tags") or {}))
    for direction in ("ingress", "egress"):
        for spec in inputs.get(direction) or []:
            group.rules.extend(_inline_rules(direction, spec, gid, origin))
    return group


def _ports(spec: Mapping[str, Any], protocol: str) -> tuple[int, int]:
    if protocol == "-1":
        return 0, 65535
    return int(spec.get("fromPort", 0)), int(spec.get("toPort", 65535))


def _protocol(value: Any) -> str:
    text = str(value).lower()
    return _PROTOCOLS.get(text, text)


def _inline_rules(direction: Direction, spec: Mapping[str, Any], gid: str, origin: str) -> Iterator[Rule]:
    """`ingress`/`egress` blocks of a SecurityGroup, and `aws.ec2.SecurityGroupRule`: one rule per peer."""
    protocol = _protocol(spec.get("protocol", "-1"))
    low, high = _ports(spec, protocol)
    peers = [*(spec.get("securityGroups") or []), *([gid] if spec.get("self") else [])]
    if spec.get("sourceSecurityGroupId"):
        peers.append(spec["sourceSecurityGroupId"])
    for peer in peers:
        yield Rule(direction, protocol, low, high, peer_group=str(peer), origin=origin)
    for cidr in [*(spec.get("cidrBlocks") or []), *(spec.get("ipv6CidrBlocks") or [])]:
        yield Rule(direction, protocol, low, high, cidr=str(cidr), origin=origin)


def _standalone_rules(type_: str, inputs: Mapping[str, Any], gid: str, urn: str) -> Iterator[Rule]:
    if type_ in (INGRESS_RULE, EGRESS_RULE):
        direction: Direction = "ingress" if type_ == INGRESS_RULE else "egress"
        protocol = _protocol(inputs.get("ipProtocol", "-1"))
        low, high = _ports(inputs, protocol)
        peer = inputs.get("referencedSecurityGroupId")
        cidr = inputs.get("cidrIpv4") or inputs.get("cidrIpv6")
        yield Rule(direction, protocol, low, high, peer_group=str(peer) if peer else None,
                   cidr=str(cidr) if cidr else None, origin=urn)
    elif type_ == LEGACY_RULE:
        yield from _inline_rules(inputs.get("type", "ingress"), inputs, gid, urn)


def _selected(term: Mapping[str, Any], group: SecurityGroup) -> bool:
    """One of an EC2NodeClass's `securityGroupSelectorTerms`: by id, by name, or by every listed tag, a
    value `*` matching any (Karpenter v1.14 website/content/en/v1.14/concepts/nodeclasses.md)."""
    if "id" in term:
        return term["id"] == group.id
    if "name" in term:
        return term["name"] == group.name
    tags = term.get("tags") or {}
    return bool(tags) and all(k in group.tags and v in ("*", group.tags[k]) for k, v in tags.items())


def node_security_groups(plan: Plan) -> dict[str, list[str]]:
    """Which groups the control plane and each kind of node carry.

    - control plane: the cluster group EKS creates, plus pulumi-eks's own when it makes one (modelled);
    - a managed node group: its launch template's groups, else the EKS cluster group (EKS adds it only
      when the template names none: docs.aws.amazon.com/eks/latest/userguide/launch-templates.html);
    - Karpenter's nodes of an EC2NodeClass: every group its selector terms match (terms are ORed).
    """
    groups = security_groups(plan)
    carried: dict[str, list[str]] = {CONTROL_PLANE: sorted(
        e["id"] for e in plan.modelled if CONTROL_PLANE in e.get("role", ()))}
    eks_group = next((e["id"] for e in plan.modelled if e["name"].startswith("eks-cluster-sg-")), None)
    templates = {r.id: r for r in plan.of_type(LAUNCH_TEMPLATE)}
    for r in plan.of_type(MANAGED_NODE_GROUP):
        template = templates.get(str((r.inputs.get("launchTemplate") or {}).get("id")))
        named = list((template.inputs if template else {}).get("vpcSecurityGroupIds") or [])
        carried[f"managed-node-group/{r.name}"] = sorted(named or ([eks_group] if eks_group else []))
    for r in plan.of_type(EC2_NODE_CLASS):
        terms = (r.inputs.get("spec") or {}).get("securityGroupSelectorTerms") or []
        carried[f"ec2nodeclass/{r.inputs['metadata']['name']}"] = sorted(
            g.id for g in groups.values() if any(_selected(t, g) for t in terms))
    return carried
