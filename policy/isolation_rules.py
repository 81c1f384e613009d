"""Rules that keep people apart on shared machinery: each job its own /tmp and /dev/shm and bounded tokens (the
Controller's slurm.conf lines), nodes with devices no cgroup fences go to one person at a time (the NodeSets), the
hub in HTTPS only (the JupyterHub release), and the repair agent held by its admission policy (the stack). The
same facts the components write (components/slinky/slurm_conf.py, components/addons/jupyterhub.py,
components/lifecycle/repair_scope.py), read back from the plan, so a regression in any of them is caught here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.model import UNKNOWN, Resource, ResourceRule, StackRule, dig, items

CONTROLLER = "kubernetes:slinky.slurm.net/v1beta1:Controller"
NODE_SET = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
ADMISSION_POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
ADMISSION_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAMESPACE_PLUGINS = frozenset({"namespace/tmpfs", "namespace/linux"})
MAX_TOKEN_LIFESPAN_S = 30 * 86400
# Device resources a job could open on a node it shares with someone else's job: not GRES, so no cgroup fence.
UNFENCED_DEVICES = ("aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "vpc.amazonaws.com/efa")
Finding = tuple[str, str]


def _conf(text: Any) -> dict[str, str]:
    """slurm.conf `Key=value` lines; the last of a key wins, as in Slurm's parser."""
    lines = [line.split("=", 1) for line in str(text or "").splitlines() if "=" in line and not line.startswith("#")]
    return {key.strip(): value.strip() for key, value in lines}


def jobs_isolated(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    extra = dig(inputs, "spec", "extraConf")
    if extra == UNKNOWN:
        return []
    conf, found = _conf(extra), []
    if conf.get("NamespaceType") not in NAMESPACE_PLUGINS:
        found.append(f"NamespaceType is {conf.get('NamespaceType')!r}: jobs share the node's /tmp and /dev/shm")
    elif "contain" not in conf.get("PrologFlags", "").lower().split(","):
        found.append("PrologFlags lacks Contain, which NamespaceType needs (slurm.conf(5))")
    lifespans = [p.split("=", 1)[1] for p in conf.get("AuthAltParameters", "").split(",")
                 if p.startswith("max_token_lifespan=")]
    if not lifespans or not lifespans[-1].isdigit() or not 0 < int(lifespans[-1]) <= MAX_TOKEN_LIFESPAN_S:
        found.append("no AuthAltParameters max_token_lifespan of at most 30 days: `scontrol token` can mint a token "
                     "that never expires")
    return found


def devices_not_shared(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    limits = dig(inputs, "spec", "slurmd", "resources", "limits") or {}
    devices = [d for d in UNFENCED_DEVICES if isinstance(limits, Mapping) and str(limits.get(d, "0")) not in ("0", "")]
    config = dig(inputs, "spec", "partition", "config")
    if not devices or config == UNKNOWN or "ExclusiveUser=YES" in str(config or "").split():
        return []
    return [f"its nodes have {', '.join(devices)}, which no cgroup fences, yet the partition is not ExclusiveUser=YES: "
            "one person's job can open the devices given to another's"]


def hub_over_tls(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if inputs.get("chart") != "jupyterhub":
        return []
    proxy = dig(inputs, "values", "proxy") or {}
    if dig(proxy, "service", "type") in ("ClusterIP", UNKNOWN):
        return []
    problems = []
    if dig(proxy, "https", "enabled") is not True:
        problems.append("proxy.https is off: the hub's load balancer serves sign-ins and tokens in plain HTTP")
    if dig(proxy, "service", "disableHttpPort") is not True:
        problems.append("proxy.service keeps its plain-HTTP port 80")
    return problems


def _grants(role: Resource) -> set[tuple[str, str]]:
    """(resource, verb) pairs of a ClusterRole that change nodes or remove NodeClaims."""
    risky = {("nodes", "patch"), ("nodes", "update"), ("nodeclaims", "delete"), ("nodes", "*"), ("nodeclaims", "*")}
    return {(res, verb) for rule in items(role.inputs.get("rules")) for res in items(rule.get("resources"))
            for verb in items(rule.get("verbs")) if (res, verb) in risky or (res == "*" and verb in ("*", "patch"))}


def node_writers_scoped(resources: Sequence[Resource]) -> list[Finding]:
    """Every service account that may patch nodes or delete NodeClaims through a ClusterRole of this stack is named
    by the matchConditions of a ValidatingAdmissionPolicy bound with Deny: RBAC alone grants those verbs on every
    node and NodeClaim of the cluster."""
    roles = {dig(r.inputs, "metadata", "name"): r for r in resources if r.type == CLUSTER_ROLE}
    bound = {dig(b.inputs, "spec", "policyName") for b in resources if b.type == ADMISSION_BINDING
             and "Deny" in items(dig(b.inputs, "spec", "validationActions"))}
    guarded = " ".join(str(c.get("expression", "")) for p in resources if p.type == ADMISSION_POLICY
                       and dig(p.inputs, "metadata", "name") in bound
                       for c in items(dig(p.inputs, "spec", "matchConditions")))
    findings = []
    for binding in (r for r in resources if r.type == CLUSTER_ROLE_BINDING):
        role = roles.get(dig(binding.inputs, "roleRef", "name"))
        if role is None or not _grants(role):
            continue
        for subject in items(binding.inputs.get("subjects")):
            user = f"system:serviceaccount:{subject.get('namespace')}:{subject.get('name')}"
            if subject.get("kind") == "ServiceAccount" and f"'{user}'" not in guarded:
                findings.append((binding.urn, f"{user} may {', '.join(sorted(v + ' ' + r for r, v in _grants(role)))} "
                                              "on every object: no admission policy of this stack narrows it"))
    return findings


JOBS_ISOLATED = ResourceRule(
    name="jobs-isolated",
    description="Every job gets its own /tmp and /dev/shm (NamespaceType with PrologFlags=Contain), and the tokens "
                "people mint expire (AuthAltParameters max_token_lifespan, 30 days at most).",
    fix="keep components/slinky/slurm_conf.py's NamespaceType and health_settings.py's PrologFlags=Alloc,Contain; "
        "set slurm.restapi.maxTokenLifespan",
    types=frozenset({CONTROLLER}),
    check=jobs_isolated,
)
DEVICES_NOT_SHARED = ResourceRule(
    name="devices-not-shared",
    description="A partition whose nodes carry Neuron devices or EFA interfaces (not fenced by cgroup) gives each "
                "node to one person at a time (ExclusiveUser=YES).",
    fix="keep ExclusiveUser=YES on the partition (components/slinky/slurm_conf.py shares_open_devices)",
    types=frozenset({NODE_SET}),
    check=devices_not_shared,
)
HUB_OVER_TLS = ResourceRule(
    name="hub-over-tls",
    description="JupyterHub behind a load balancer serves HTTPS only (proxy.https on, no port 80).",
    fix="set addons.jupyterhub.exposure.tls (an ACM certificate or a TLS Secret), or exposure.type: cluster",
    types=frozenset({HELM_RELEASE}),
    check=hub_over_tls,
)
NODE_WRITERS_SCOPED = StackRule(
    name="node-writers-scoped",
    description="A service account that may patch nodes or delete NodeClaims is narrowed by an admission policy.",
    fix="bind a ValidatingAdmissionPolicy whose matchConditions name the account (components/lifecycle/"
        "repair_scope.py does for the repair agent)",
    check=node_writers_scoped,
)
ISOLATION_RESOURCE_RULES = (JOBS_ISOLATED, DEVICES_NOT_SHARED, HUB_OVER_TLS)
ISOLATION_STACK_RULES = (NODE_WRITERS_SCOPED,)
