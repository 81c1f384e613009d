"""The deploy check's *network* rule: every flow the cluster needs, evaluated against the security groups
and rules of the plan (and the ones AWS and pulumi-eks create, as `Plan.modelled` describes them).

A flow passes when the receiver's groups admit it (an ingress rule whose peer is one of the sender's
groups, or whose address block holds the sender) and the sender's groups let it out (an egress rule to
one of the receiver's groups or to a block holding it). Security groups are stateful: replies need no
rule. Each flow says why the cluster needs it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from components.config.cluster import ClusterConfig
from components.findings import Finding
from components.names import LOGIN_TAINT, WORLD_CIDRS
from scripts.checks.pod_flows import EPHEMERAL, srun_ports
from scripts.offline.plan_model import Plan
from scripts.offline.security_groups import (
    CONTROL_PLANE,
    Direction,
    Rule,
    SecurityGroup,
    cidr_within,
    security_groups,
)

# The flows are written from the services' documentation, independently of the components that build the
# rules (a wrong port there must show here). Lustre: docs.aws.amazon.com/fsx/latest/LustreGuide/
# limit-access-security-groups.html.
LUSTRE_PORTS = ((988, 988), (1018, 1023))
NFS_PORT = 2049  # EFS mount targets: docs.aws.amazon.com/efs/latest/ug/network-access.html
# Admission webhooks on the system nodes, called by the control plane: cert-manager's (cert-manager
# v1.21.1 deploy/charts/cert-manager/values.yaml webhook.securePort), Slinky's (slurm-operator v1.2.1
# helm/slurm-operator/values.yaml webhook.serverPort), KEDA's (kedacore/charts v2.20.2 keda/values.yaml
# webhooks.port).
WEBHOOK_PORTS = {"cert-manager webhook": 10250, "slurm-operator webhook": 9443, "KEDA admission webhook": 9443}
SLURMCTLD_PORT, SLURMD_PORT = 6817, 6818  # slurm.conf SlurmctldPort, SlurmdPort defaults (Slurm 25.11 man page)
CLUSTER_TAG = "kubernetes.io/cluster/{}"


@dataclass(frozen=True)
class Endpoint:
    """One side of a flow: what carries which groups, or an address block outside them."""

    name: str
    groups: tuple[str, ...] = ()
    cidrs: tuple[str, ...] = ()
    external: bool = False  # outside AWS (a laptop, a hosted CI runner): no egress rules of ours apply


@dataclass(frozen=True)
class Flow:
    who: Endpoint
    whom: Endpoint
    protocol: str  # "tcp", "udp", or "-1" for all traffic (EFA's SRD is neither TCP nor UDP)
    ports: tuple[int, int]
    why: str
    # EFA's OS-bypass traffic is admitted by group membership, not by address: a rule to 0.0.0.0/0 does
    # not carry it (the EKS group has its own outbound-to-self rule "for EFA traffic", sec-group-reqs.html).
    by_group_only: bool = False

    @property
    def label(self) -> str:
        what = "all traffic" if self.protocol == "-1" else f"{self.protocol} {_ports(self.ports)}"
        return f"{self.who.name} -> {self.whom.name} ({what})"


@dataclass
class Topology:
    """The endpoints of one plan."""

    groups: dict[str, SecurityGroup]
    control_plane: Endpoint
    system: Endpoint
    login: Endpoint | None  # the login pods' own node group (components/aws/eks.py), where it exists
    partitions: dict[str, Endpoint]
    database: Endpoint | None
    fsx: Endpoint | None
    efs: Endpoint | None = None  # the model file system's mount targets (storage.efs)
    srun_ports: tuple[int, int] = EPHEMERAL  # where srun listens: the plan's SrunPortRange (pod_flows.srun_ports)

    @property
    def nodes(self) -> list[Endpoint]:
        return [self.system, *([self.login] if self.login else []), *self.partitions.values()]

    @property
    def slurm_clients(self) -> Endpoint:
        """Where srun runs and step I/O returns: the login pods."""
        return self.login or self.system


def _ports(ports: tuple[int, int]) -> str:
    low, high = ports
    return str(low) if low == high else f"{low}-{high}"


def topology(plan: Plan) -> Topology:
    groups = security_groups(plan)
    vpc_cidrs = tuple(r.inputs["cidrBlock"] for r in plan.of_type("aws:ec2/vpc:Vpc") if r.inputs.get("cidrBlock"))
    managed = {key.split("/", 1)[1]: ids for key, ids in plan.nodes.items() if key.startswith("managed-node-group/")}
    # The login pods' node group is the one tainted for them (components/names.py LOGIN_TAINT).
    login_groups = [r.name for r in plan.of_type("eks:index:ManagedNodeGroup")
                    if any(taint.get("key") == LOGIN_TAINT["key"] for taint in r.inputs.get("taints") or [])]
    login = sorted({g for name in login_groups for g in managed.pop(name, [])}) if login_groups else None
    system = sorted({g for ids in managed.values() for g in ids})
    partitions = {key.split("/", 1)[1]: Endpoint(f"Karpenter nodes of {key.split('/', 1)[1]}", tuple(ids), vpc_cidrs)
                  for key, ids in sorted(plan.nodes.items()) if key.startswith("ec2nodeclass/")}
    rds = plan.of_type("aws:rds/instance:Instance")
    fsx = plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    efs_groups = sorted({g for r in plan.of_type("aws:efs/mountTarget:MountTarget")
                         for g in r.inputs.get("securityGroups") or ()})
    return Topology(
        groups=groups,
        control_plane=Endpoint("the EKS control plane", tuple(plan.nodes.get(CONTROL_PLANE, ())), vpc_cidrs),
        system=Endpoint("the system nodes", tuple(system), vpc_cidrs),
        login=Endpoint("the login nodes", tuple(login), vpc_cidrs) if login is not None else None,
        partitions=partitions,
        database=Endpoint("slurmdbd's database (RDS)", tuple(rds[0].inputs.get("vpcSecurityGroupIds") or ()),
                          vpc_cidrs) if rds else None,
        fsx=Endpoint("FSx for Lustre", tuple(fsx[0].inputs.get("securityGroupIds") or ()), vpc_cidrs) if fsx else None,
        efs=Endpoint("EFS mount targets", tuple(efs_groups), vpc_cidrs)
        if plan.of_type("aws:efs/fileSystem:FileSystem") else None,
        srun_ports=srun_ports(plan),
    )


def flows(t: Topology, config: ClusterConfig) -> Iterator[Flow]:
    """The table of what the cluster needs: who reaches whom, on what, and why."""
    cp, system = t.control_plane, t.system
    for node in t.nodes:
        yield Flow(node, cp, "tcp", (443, 443), "kubelets and pods call the Kubernetes API "
                   "(docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html)")
        yield Flow(cp, node, "tcp", (10250, 10250), "the API server reaches each kubelet: logs, exec, metrics")
        for protocol in ("udp", "tcp"):
            yield Flow(node, system, protocol, (53, 53), "every pod resolves names with CoreDNS, on the system nodes")
    for webhook, port in WEBHOOK_PORTS.items():
        yield Flow(cp, system, "tcp", (port, port), f"the API server calls the {webhook} on the system nodes")
    # One EC2NodeClass per partition and per Kubernetes pool (names never collide: validator pool-name). A pool
    # needs what its workers need of each other (EFA, NCCL sockets) but none of Slurm's ports.
    groups = {**config.partitions, **config.kubernetes_pools}
    for name, nodes in t.partitions.items():
        if groups[name].efa:
            why = ("EFA: the nodes' group must admit all traffic from itself and send all traffic to itself "
                   "(docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html, security group step)")
            yield Flow(nodes, nodes, "-1", (0, 65535), why, by_group_only=True)
        else:
            yield Flow(nodes, nodes, "tcp", (0, 65535), "NCCL's socket transport and Slurm step traffic between nodes")
        if name not in config.partitions:
            continue
        yield Flow(system, nodes, "tcp", (SLURMD_PORT, SLURMD_PORT), "slurmctld reaches slurmd")
        yield Flow(system, nodes, "tcp", t.srun_ports, "slurmctld calls back srun in a batch script (SrunPortRange)")
        yield Flow(t.slurm_clients, nodes, "tcp", (SLURMD_PORT, SLURMD_PORT), "srun on the login pods reaches slurmd")
        yield Flow(nodes, system, "tcp", (SLURMCTLD_PORT, SLURMCTLD_PORT), "slurmd registers with slurmctld")
        yield Flow(nodes, t.slurm_clients, "tcp", t.srun_ports,
                   "slurmd returns step I/O to srun on a login pod (SrunPortRange)")
    if t.login is not None:
        yield Flow(t.login, system, "tcp", (SLURMCTLD_PORT, SLURMCTLD_PORT), "sbatch and squeue on the login pods "
                   "reach slurmctld")
        yield Flow(system, t.login, "tcp", t.srun_ports, "slurmctld calls back srun on the login pods (SrunPortRange)")
    if t.database is not None:
        yield Flow(system, t.database, "tcp", (3306, 3306), "slurmdbd (system nodes) writes accounting to MariaDB")
    if t.fsx is not None:
        for low, high in LUSTRE_PORTS:
            for client in t.nodes:  # login pods on the system nodes, slurmd pods on Karpenter's
                yield Flow(client, t.fsx, "tcp", (low, high), "Lustre clients mount /shared")
                yield Flow(t.fsx, client, "tcp", (low, high), "Lustre servers call their clients back")
            yield Flow(t.fsx, t.fsx, "tcp", (low, high), "the file servers talk to each other")
    if t.efs is not None:
        for client in t.nodes:  # the node's kernel mounts NFS for login and slurmd pods
            yield Flow(client, t.efs, "tcp", (NFS_PORT, NFS_PORT), "NFS clients mount the model file system")


def _admitted(rules: Iterable[Rule], peer: Endpoint, flow: Flow) -> bool:
    """Do these rules, together, cover every port of the flow from/to `peer`?"""
    spans = sorted((r.from_port, r.to_port) if r.protocol != "-1" else (0, 65535) for r in rules
                   if _same_protocol(r, flow.protocol) and _matches_peer(r, peer, flow.by_group_only))
    reach = flow.ports[0]
    for low, high in spans:
        if low > reach:
            break
        reach = max(reach, high + 1)
    return reach > flow.ports[1]


def _same_protocol(rule: Rule, protocol: str) -> bool:
    return rule.protocol == "-1" or (protocol != "-1" and rule.protocol == protocol)


def _matches_peer(rule: Rule, peer: Endpoint, by_group_only: bool) -> bool:
    if rule.peer_group is not None:
        return rule.peer_group in peer.groups
    if by_group_only:
        return False
    if rule.cidr in WORLD_CIDRS:
        return True
    return bool(peer.cidrs) and all(rule.admits_address(c) for c in peer.cidrs)


def _rules(t: Topology, groups: tuple[str, ...], direction: Direction) -> list[Rule]:
    return [r for g in groups if g in t.groups for r in t.groups[g].rules_of(direction)]


def _names(t: Topology, groups: tuple[str, ...]) -> str:
    return ", ".join(f"{t.groups[g].name} ({g})" if g in t.groups else g for g in groups) or "none"


def _where(t: Topology, side: Endpoint) -> str:
    return _names(t, side.groups) if side.groups else ", ".join(side.cidrs)


def evaluate(t: Topology, flow: Flow) -> Finding | None:
    bare = next((side for side in (flow.who, flow.whom) if not side.groups and not side.external), None)
    if bare is not None:
        return Finding(rule="network", severity="error", resource=flow.label,
                       message=f"{flow.why}; but {bare.name} carry no security group at all",
                       fix="check the groups the node class or resource selects (plan.json `nodes`)")
    if not _admitted(_rules(t, flow.whom.groups, "ingress"), flow.who, flow):
        return Finding(rule="network", severity="error", resource=flow.label,
                       message=f"{flow.why}; no ingress rule of {flow.whom.name}'s groups [{_where(t, flow.whom)}] "
                       f"admits it from {flow.who.name} [{_where(t, flow.who)}]",
                       fix=f"give both the same group, or add an ingress rule for {flow.label}")
    if not flow.who.external and not _admitted(_rules(t, flow.who.groups, "egress"), flow.whom, flow):
        return Finding(rule="network", severity="error", resource=flow.label,
                       message=f"{flow.why}; no egress rule of {flow.who.name}'s groups [{_names(t, flow.who.groups)}] "
                       f"lets it out to {flow.whom.name}",
                       fix=f"add an egress rule for {flow.label}")
    return None


def deployer_findings(plan: Plan, t: Topology, config: ClusterConfig) -> Iterator[Finding]:
    """`pulumi up` creates every Kubernetes object through the EKS API: can it reach the endpoint?"""
    label = "the deployer (pulumi up) -> the EKS API endpoint (tcp 443)"
    cluster = next(iter(plan.of_type("eks:index:Cluster")), None)
    if cluster is None:
        return
    public = bool(cluster.inputs.get("endpointPublicAccess"))
    public_cidrs = list(cluster.inputs.get("publicAccessCidrs") or ([] if not public else ["0.0.0.0/0"]))
    deployer = config.network.deployer
    if deployer is None:
        if not public:
            yield Finding(rule="network", severity="error", resource=label,
                          message="the endpoint is private and no deployer is declared: Helm releases "
                          "and Kubernetes objects cannot be created from outside the VPC",
                          fix="declare network.deployer (docs/operating.md, Deploying privately)")
        return
    if deployer.via == "public":
        outside = [c for c in deployer.cidrs if not (public and any(cidr_within(c, p) for p in public_cidrs))]
        if outside:
            yield Finding(rule="network", severity="error", resource=label,
                          message=f"the deployer's ranges {outside} are not admitted by the public endpoint "
                          f"(endpointPublicAccess={public}, publicAccessCidrs={public_cidrs})",
                          fix="open the public endpoint to network.deployer.cidrs (network.apiPublicCidrs)")
        return
    found = evaluate(t, Flow(Endpoint("the deployer (pulumi up)", cidrs=tuple(deployer.cidrs), external=True),
                             t.control_plane, "tcp", (443, 443),
                             "pulumi up reaches the private endpoint from inside the VPC"))
    if found:
        yield found


def login_load_balancer_findings(t: Topology, config: ClusterConfig, cluster_name: str) -> Iterator[Finding]:
    """The login NLB (in-tree service controller, instance targets) adds its client and health-check rules to
    ONE group per node: the one tagged kubernetes.io/cluster/<name>, else the only group; with several
    tagged (or several untagged and none tagged) it fails (kubernetes/cloud-provider-aws
    pkg/providers/v1/aws.go findSecurityGroupForInstance, at 63ec440c)."""
    tag = CLUSTER_TAG.format(cluster_name)
    for node in t.nodes:
        tagged = [g for g in node.groups if g in t.groups and tag in t.groups[g].tags]
        if len(tagged) > 1 or (not tagged and len(node.groups) != 1):
            yield Finding(rule="network", severity="error",
                          resource=f"the login NLB -> {node.name} (tcp 22 via the NodePort)",
                          message=f"the load balancer controller needs exactly one group tagged {tag} on {node.name}; "
                          f"they carry [{_names(t, node.groups)}], {len(tagged)} tagged",
                          fix=f"tag exactly one of the nodes' groups {tag}")


def check(plan: Plan, config: ClusterConfig) -> list[Finding]:
    t = topology(plan)
    found = [f for flow in flows(t, config) if (f := evaluate(t, flow))]
    found += deployer_findings(plan, t, config)
    found += login_load_balancer_findings(t, config, config.name_for(plan.stack))
    return found
