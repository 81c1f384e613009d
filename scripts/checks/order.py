"""The deploy check's *order* rule: everything that needs another resource is created after it.

Pulumi creates a resource once everything it waits for exists: its recorded dependencies (inputs that
are outputs of other resources, and `depends_on`), its provider (with the provider's own dependencies),
and, where it waits for a component, every resource inside that component. A need that is not in that
closure is a race the first `pulumi up` can lose.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from components.findings import Finding, resource_label
from scripts.offline.plan_model import Plan, PlannedResource

CLUSTER = "eks:index:Cluster"
NODE_GROUP = "eks:index:ManagedNodeGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"
ADDON = "aws:eks/addon:Addon"
# Kinds whose objects become pods (directly, or through their operator): they need a node to run on.
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod",
             "Controller", "NodeSet", "LoginSet", "RestApi", "Accounting", "MariaDB"}
# EKS add-ons that are DaemonSets only: ACTIVE with no node. Every other add-on (coredns, the EBS CSI
# driver's controller, ...) is a Deployment that the add-on waits for.
DAEMONSET_ADDONS = {"vpc-cni", "kube-proxy", "eks-pod-identity-agent"}
# API groups -> the charts that serve them: the CRD first, and the admission webhook that validates the
# objects where the project has one (an object created before its webhook runs is rejected).
SERVED_BY = {
    "karpenter.sh": ("karpenter-crd",),
    "karpenter.k8s.aws": ("karpenter-crd",),
    "slinky.slurm.net": ("slurm-operator-crds", "slurm-operator"),
    "keda.sh": ("keda",),
    "monitoring.coreos.com": ("kube-prometheus-stack",),
    "k8s.mariadb.com": ("mariadb-operator-crds", "mariadb-operator"),
    "cert-manager.io": ("cert-manager",),
}


@dataclass(frozen=True)
class Need:
    resource: PlannedResource
    needs: PlannedResource
    why: str


class Waits:
    """What each resource of a plan waits for, transitively."""

    def __init__(self, plan: Plan) -> None:
        self.by_urn = plan.by_urn()
        self.children: dict[str, list[str]] = {}
        for r in plan.resources:
            if r.parent:
                self.children.setdefault(r.parent, []).append(r.urn)
        self._memo: dict[str, frozenset[str]] = {}

    def _descendants(self, urn: str) -> Iterator[str]:
        for child in self.children.get(urn, ()):
            yield child
            yield from self._descendants(child)

    def _direct(self, urn: str) -> set[str]:
        r = self.by_urn.get(urn)
        if r is None:
            return set()
        direct = {*r.dependencies, *([r.provider] if r.provider else [])}
        # Waiting for a component is waiting for everything inside it.
        return direct | {d for dep in direct for d in self._descendants(dep)}

    def closure(self, urn: str) -> frozenset[str]:
        if urn not in self._memo:
            seen: set[str] = set()
            todo = [urn]
            while todo:
                for dep in self._direct(todo.pop()):
                    if dep not in seen:
                        seen.add(dep)
                        todo.append(dep)
            self._memo[urn] = frozenset(seen)
        return self._memo[urn]


def _chart(r: PlannedResource) -> str:
    return str(r.inputs.get("chart") or "").rsplit("/", 1)[-1]


def _namespace_of(r: PlannedResource) -> str | None:
    """Where a Release installs, or a namespaced object lives."""
    if r.type == RELEASE:
        return r.inputs.get("namespace")
    return (r.inputs.get("metadata") or {}).get("namespace") if r.is_manifest else None


def _guards(plan: Plan) -> dict[str, list[PlannedResource]]:
    """Per namespace, what must exist before a pod runs there: the Namespace (its Pod Security labels decide
    what is admitted) and every NetworkPolicy in it (a pod started before them runs unsegmented)."""
    found: dict[str, list[PlannedResource]] = {}
    for r in plan.resources:
        kind = r.inputs.get("kind") if r.is_manifest else None
        if kind == "Namespace":
            found.setdefault((r.inputs.get("metadata") or {}).get("name"), []).append(r)
        elif kind == "NetworkPolicy":
            found.setdefault(_namespace_of(r), []).append(r)
    return found


def needs(plan: Plan) -> Iterator[Need]:
    """The table of what needs what, read from the plan."""
    guards = _guards(plan)
    clusters = plan.of_type(CLUSTER)
    # Ordinary pods run on the untainted groups; a tainted one (the login nodes) takes only pods that tolerate it.
    node_groups = [g for g in plan.of_type(NODE_GROUP) if not g.inputs.get("taints")]
    releases = {_chart(r): r for r in plan.of_type(RELEASE)}
    cluster_names = {r.inputs.get("name"): r for r in clusters}
    cnis = [r for r in plan.of_type(ADDON) if r.inputs.get("addonName") == "vpc-cni"]
    for r in plan.resources:
        if r.type == NODE_GROUP:
            # A node turns Ready only once the CNI runs on it, and the managed node group waits for Ready nodes.
            yield from (Need(r, cni, "its nodes become Ready only once the VPC CNI runs on them") for cni in cnis)
        if r.type.startswith("pulumi:providers:") or not r.custom:
            continue
        if r.inputs.get("clusterName") in cluster_names:
            yield Need(r, cluster_names[r.inputs["clusterName"]], "it names the EKS cluster, which must exist")
        if r.type.startswith("kubernetes:"):
            yield from (Need(r, c, "Kubernetes objects are created through the cluster's API") for c in clusters)
        awaited = r.type == RELEASE and not r.inputs.get("skipAwait")
        runs_pods = awaited or (r.is_manifest and r.inputs.get("kind") in POD_KINDS) or (
            r.type == ADDON and r.inputs.get("addonName") not in DAEMONSET_ADDONS)
        if runs_pods:
            yield from (Need(r, g, "its pods need a node: without one, `pulumi up` waits until it times out")
                        for g in node_groups)
            yield from (Need(r, guard, "its pods must not run before their namespace's Pod Security labels and "
                             "NetworkPolicies exist") for guard in guards.get(_namespace_of(r), ()))
        group = str(r.inputs.get("apiVersion") or "").partition("/")[0] if r.is_manifest else ""
        for chart in SERVED_BY.get(group, ()):
            if chart in releases:
                yield Need(r, releases[chart], f"the chart {chart} serves {group} (its CRD or admission webhook)")


def inside_the_cluster_component(plan: Plan) -> Iterator[Finding]:
    """pulumi-eks creates CoreDNS inside `eks.Cluster` when asked to; with no default node group that is
    before any node exists, and the add-on never becomes ACTIVE (pulumi/pulumi-eks#1819;
    nodejs/eks/cluster/cluster.ts `corednsExplicitlyEnabled`)."""
    for r in plan.of_type(CLUSTER):
        coredns = r.inputs.get("corednsAddonOptions") or {}
        if r.inputs.get("skipDefaultNodeGroup") and (coredns.get("enabled") or coredns.get("configurationValues")):
            yield Finding(rule="order", severity="error", resource=resource_label(r.urn), urn=r.urn,
                          message="creates the CoreDNS add-on inside the cluster component, before any node group: it "
                          "has no node to run on and `pulumi up` waits for it until it fails",
                          fix="set corednsAddonOptions.enabled=false and create the add-on after the node group")


def check(plan: Plan) -> list[Finding]:
    waits = Waits(plan)
    found = [Finding(rule="order", severity="error", resource=resource_label(n.resource.urn), urn=n.resource.urn,
                     message=f"does not wait for {resource_label(n.needs.urn)}: {n.why}",
                     fix="make it depend on that resource (an output of it as input, or depends_on)")
             for n in needs(plan) if n.needs.urn not in waits.closure(n.resource.urn)]
    return found + list(inside_the_cluster_component(plan))
