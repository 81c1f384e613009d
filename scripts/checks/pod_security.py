"""The deploy check's *pod-security* rule: every pod the plan's objects will make is admitted in its namespace, by
Pod Security Admission at the namespace's `enforce` level (scripts/checks/pod_security_standards.py) and by the
ValidatingAdmissionPolicies the plan binds there (scripts/checks/admission_policy.py).

Pod templates: Pods, the templates of Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and CronJobs, and
of Slinky's objects. Pod Security Admission enforces on pods only (templates only warn), so a template that
breaks its namespace's level is a workload whose pods never start. A Slinky object's pod is its `template` plus
the daemon containers its spec describes; the operator's own additions are modelled only where admission depends
on them: a NodeSet's slurmd pod is created by the operator's service account, owned by the NodeSet, labelled as a
worker and privileged (components/slinky/host_access.py, which cites slurm-operator v1.2.1). Every other
templated pod is created by a kube-controller-manager controller, which is what matters here: not the operator.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from components.findings import Finding, resource_label
from components.kubernetes.namespaces import NAME_LABEL, PREFIX
from components.slinky import host_access
from policy.model import dig
from scripts.checks.admission_policy import Request, rejections
from scripts.checks.pod_security_standards import LEVELS, evaluate
from scripts.offline.plan_model import Plan, known

TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"), "StatefulSet": ("spec", "template"), "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"), "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# The container fields of each Slinky v1beta1 kind (../shared/crds/slinky), as the operator names the containers.
SLINKY_CONTAINERS: dict[str, tuple[str, ...]] = {
    "NodeSet": ("slurmd", "logfile"), "LoginSet": ("login",), "Controller": ("slurmctld", "reconfigure", "logfile"),
    "RestApi": ("slurmrestd",), "Accounting": ("slurmdbd",),
}
SLINKY_API_VERSION = "slinky.slurm.net/v1beta1"
CONTROLLER_MANAGER = "system:kube-controller-manager"  # anyone but the operator


@dataclass(frozen=True)
class PodTemplate:
    urn: str
    namespace: str
    metadata: dict[str, Any]
    spec: dict[str, Any]
    creator: str  # the user the API server sees creating the pods


def _slinky_pod(kind: str, doc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str]:
    spec = doc.get("spec") or {}
    template = spec.get("template") or {}
    metadata = dict(template.get("metadata") or {})
    containers = [{"name": name, **spec[name]} for name in SLINKY_CONTAINERS[kind] if isinstance(spec.get(name), dict)]
    creator = CONTROLLER_MANAGER
    if kind == "NodeSet":
        creator = host_access.OPERATOR_USER
        metadata["labels"] = {**(metadata.get("labels") or {}), **host_access.WORKER_LABELS}
        metadata["ownerReferences"] = [{"apiVersion": SLINKY_API_VERSION, "kind": kind, "controller": True,
                                        "name": doc["metadata"]["name"]}]
        containers = [{**c, "securityContext": {**host_access.SLURMD_SECURITY_CONTEXT, **c.get("securityContext", {})}}
                      if c["name"] == host_access.SLURMD_CONTAINER else c for c in containers]
    pod_spec = dict(template.get("spec") or {})
    pod_spec["containers"] = [*(pod_spec.get("containers") or []), *containers]
    return metadata, pod_spec, creator


def pod_templates(plan: Plan) -> Iterator[PodTemplate]:
    for r in plan.resources:
        if not r.is_manifest:
            continue
        doc = known(r.inputs)
        kind, namespace = doc.get("kind"), dig(doc, "metadata", "namespace") or "default"
        if kind == "Pod":
            yield PodTemplate(r.urn, namespace, doc.get("metadata") or {}, doc.get("spec") or {}, CONTROLLER_MANAGER)
        elif kind in TEMPLATE_PATHS:
            template = dig(doc, *TEMPLATE_PATHS[kind]) or {}
            yield PodTemplate(r.urn, namespace, template.get("metadata") or {}, template.get("spec") or {},
                              CONTROLLER_MANAGER)
        elif doc.get("apiVersion") == SLINKY_API_VERSION and kind in SLINKY_CONTAINERS:
            yield PodTemplate(r.urn, namespace, *_slinky_pod(kind, doc))


def namespace_labels(plan: Plan) -> dict[str, dict[str, str]]:
    """Each planned Namespace's labels, with the name label the API server adds."""
    return {doc["metadata"]["name"]: {**(doc["metadata"].get("labels") or {}), NAME_LABEL: doc["metadata"]["name"]}
            for doc in plan.manifests() if doc.get("kind") == "Namespace"}


def check(plan: Plan) -> list[Finding]:
    labels = namespace_labels(plan)
    manifests = plan.manifests()
    policies = [d for d in manifests if d.get("kind") == "ValidatingAdmissionPolicy"]
    bindings = [d for d in manifests if d.get("kind") == "ValidatingAdmissionPolicyBinding"]
    found = []
    for pod in pod_templates(plan):
        if pod.namespace not in labels:
            continue  # not created by this program (kube-system): the cluster's defaults apply
        where = resource_label(pod.urn)
        level = labels[pod.namespace].get(f"{PREFIX}/enforce", "privileged")
        if level not in LEVELS:
            found.append(Finding(rule="pod-security", severity="error", resource=where, urn=pod.urn,
                                 message=f"namespace {pod.namespace} enforces unknown Pod Security level {level!r}",
                                 fix=f"label it one of {', '.join(LEVELS)}"))
            continue
        forbidden = evaluate(level, pod.metadata, pod.spec)
        if forbidden:
            found.append(Finding(
                rule="pod-security", severity="error", resource=where, urn=pod.urn,
                message=f"its pods break Pod Security {level!r}, enforced in namespace {pod.namespace}: "
                + "; ".join(f.render() for f in forbidden) + ". Pod Security Admission rejects every such pod",
                fix=f"take these settings out of the pod template, or (only with a reason) lower {pod.namespace}'s "
                "level in components/kubernetes/namespaces.py POD_SECURITY"))
        obj = {"metadata": {**pod.metadata, "namespace": pod.namespace}, "spec": pod.spec}
        request = Request("CREATE", "pods", pod.creator, labels[pod.namespace])
        denied = [m for p in policies for b in bindings for m in rejections(p, b, obj, request)]
        if denied:
            found.append(Finding(
                rule="pod-security", severity="error", resource=where, urn=pod.urn,
                message=f"the API server would reject its pods in namespace {pod.namespace}: " + "; ".join(denied),
                fix="remove the host access from the pod template: in the slurm namespace only the operator's slurmd "
                "pods may have it (components/slinky/host_access.py)"))
    return found

