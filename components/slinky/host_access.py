"""The slurm namespace enforces Pod Security `privileged` for slurmd alone: a ValidatingAdmissionPolicy there
rejects every pod that asks for host access, except the slurmd pods the Slinky operator makes for a NodeSet, and
those only with what the operator gives them.

What the operator gives slurmd (slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go
slurmdContainer): `privileged: true` and capabilities BPF, NET_ADMIN, SYS_ADMIN, SYS_NICE on the container named
`slurmd`; no host namespaces, hostPath volumes or host ports (its volumes: a projected Secret and an in-memory
emptyDir, nodesetVolumes). The privilege is what Slurm's own confinement of jobs needs inside a container:
proctrack/cgroup and task/cgroup with cgroup/v2 (components/slinky/slurm_conf.py; the operator's cgroup.conf,
controllerbuilder/controller_config.go buildCgroupConf) create a cgroup per job and step, which needs a writable
cgroup tree; ConstrainDevices loads a BPF device program per job (SchedMD/slurm slurm-25-11-6-1
src/plugins/cgroup/v2/cgroup_v2.c, hence BPF); pyxis and enroot (plugstack.conf) mount job container images
from slurmstepd. The operator's source gives no reason per capability: this mapping is ours.
What closes the gap instead of a weaker slurmd: jobs run as the people who submit them, never root
(`DisableRootJobs=YES`, components/slinky/slurm_conf.py; people as themselves, components/slinky/identity.py),
and the nodes' own powers stay out of a job's reach (issue 15: IMDS hop limit 1, node roles without CNI or SSM
permissions).

Who may create such a pod: the operator's service account only. It creates NodeSet pods itself
(internal/utils/podcontrol/podcontrol.go CreatePodsWithGenerateName), owned by their NodeSet
(internal/controller/nodeset/utils/utils.go NewNodeSetStatefulSetPod: metav1.NewControllerRef(nodeset,
NodeSetGVK)) and labelled app.kubernetes.io/name=slurmd, app.kubernetes.io/component=worker
(internal/builder/labels/labels.go WithWorkerLabels). Labels and owner references alone could be copied by anyone
who may create pods; the requesting user cannot. Ephemeral containers (`kubectl debug`) never get host access.

ValidatingAdmissionPolicy is admissionregistration.k8s.io/v1 since Kubernetes 1.30 (kubernetes.io/docs/reference/
access-authn-authz/validating-admission-policy). Every expression is plain CEL with `has()` (no optional
syntax), so scripts/manifests/cel_rules.py evaluates it the same offline.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.kubernetes.namespaces import NAME_LABEL, SLINKY
from components.names import SLURM_NAMESPACE
from components.slinky.health_settings import DCGM_JOB_MAP_DIR

POLICY = "slurm-eks-slurm-host-access"
API_VERSION = "admissionregistration.k8s.io/v1"
NODESET_API_VERSION = "slinky.slurm.net/v1beta1"
# slurm-operator v1.2.1 helm/slurm-operator templates/_operator.tpl serviceAccountName: the release's fullname
# unless named; components/slinky/operator.py names it, and installs the chart into SLINKY.
OPERATOR_SERVICE_ACCOUNT = "slurm-operator"
OPERATOR_USER = f"system:serviceaccount:{SLINKY}:{OPERATOR_SERVICE_ACCOUNT}"
SLURMD_CONTAINER = "slurmd"  # labels.WorkerApp, the container's name
WORKER_LABELS = {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/component": "worker"}
SLURMD_CAPABILITIES = ("BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE")
SLURMD_SECURITY_CONTEXT = {"privileged": True, "capabilities": {"add": list(SLURMD_CAPABILITIES)}}


def _quoted(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _label_is(key: str, value: str) -> str:
    return f"(has(object.metadata.labels) && '{key}' in object.metadata.labels && " \
           f"object.metadata.labels['{key}'] == '{value}')"


# Each variable is evaluated once per request; `variables.<name>` in the validations.
VARIABLES: dict[str, str] = {
    # What this request adds: on `kubectl debug` (the ephemeralcontainers subresource) only the new ones count.
    "containers": "request.subResource == 'ephemeralcontainers' ? "
                  "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : []) : "
                  "(has(object.spec.initContainers) ? object.spec.initContainers : []) + object.spec.containers + "
                  "(has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])",
    "slurmd": f"request.subResource == '' && request.userInfo.username == '{OPERATOR_USER}' && "
              + " && ".join(_label_is(k, v) for k, v in WORKER_LABELS.items())
              + " && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
              f"r.apiVersion == '{NODESET_API_VERSION}' && r.kind == 'NodeSet' && has(r.controller) && r.controller)",
    "privileged": "variables.containers.filter(c, has(c.securityContext) && has(c.securityContext.privileged) && "
                  "c.securityContext.privileged).map(c, c.name)",
    "capable": "variables.containers.filter(c, has(c.securityContext) && has(c.securityContext.capabilities) && "
               "has(c.securityContext.capabilities.add) && size(c.securityContext.capabilities.add) > 0)",
}
VALIDATIONS: list[dict[str, str]] = [
    {"expression": "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && "
                   "!(has(object.spec.hostPID) && object.spec.hostPID) && "
                   "!(has(object.spec.hostIPC) && object.spec.hostIPC)",
     "message": "no pod in the slurm namespace may use hostNetwork, hostPID or hostIPC"},
    # One exception: slurmd's dcgm-exporter job-mapping directory (job ids only; components/slinky/node_health.py).
    {"expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || "
                   f"(variables.slurmd && v.hostPath.path == '{DCGM_JOB_MAP_DIR}'))",
     "message": "no pod in the slurm namespace may mount a hostPath volume (NodeSet pods: only "
                f"{DCGM_JOB_MAP_DIR})"},
    {"expression": "variables.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
     "message": "no pod in the slurm namespace may use a hostPort"},
    {"expression": f"variables.privileged.all(name, variables.slurmd && name == '{SLURMD_CONTAINER}')",
     "message": f"only the slurmd container of a NodeSet pod made by {OPERATOR_USER} may be privileged"},
    {"expression": f"variables.capable.all(c, variables.slurmd && c.name == '{SLURMD_CONTAINER}' && "
                   f"c.securityContext.capabilities.add.all(cap, cap in {_quoted(SLURMD_CAPABILITIES)}))",
     "message": f"only the slurmd container of a NodeSet pod made by {OPERATOR_USER} may add capabilities, and "
                f"only {', '.join(SLURMD_CAPABILITIES)}"},
]


def policy_spec() -> dict[str, Any]:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchLabels": {NAME_LABEL: SLURM_NAMESPACE}},
            # Host fields of a pod cannot change after creation; ephemeral containers are added by UPDATE.
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                 "resources": ["pods/ephemeralcontainers"]},
            ],
        },
        "variables": [{"name": name, "expression": expression} for name, expression in VARIABLES.items()],
        "validations": VALIDATIONS,
    }


def binding_spec() -> dict[str, Any]:
    return {"policyName": POLICY, "validationActions": ["Deny"]}


def host_access_policy(name: str, provider: k8s.Provider, parent: pulumi.Resource,
                       namespace: pulumi.Resource) -> list[pulumi.Resource]:
    """The policy and its binding, created with the namespace, before any pod can be created there."""
    opts = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[namespace])
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        name, metadata={"name": POLICY}, spec=policy_spec(), opts=opts)
    binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{name}-binding", metadata={"name": POLICY}, spec=binding_spec(),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[policy]))
    return [policy, binding]
