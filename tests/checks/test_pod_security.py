"""The deploy check's pod-security rule and its port of the Pod Security Standards (pod-security-admission
v0.33.13): each check passes a compliant pod and names the pod that breaks it; the shipped stacks' pods are
admitted; a login pod asking for host access in the slurm namespace, and a Job breaking a restricted namespace,
are named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from scripts.checks import deploy, pod_security
from scripts.checks.pod_security_standards import checks, evaluate
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import shipped_plan

# Passes `restricted`: what cert-manager's chart gives its pods.
RESTRICTED_POD: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "app", "image": "app", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    "volumes": [{"name": "config", "configMap": {"name": "c"}}, {"name": "data", "emptyDir": {}}],
}


def with_(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    spec = copy.deepcopy(RESTRICTED_POD)
    change(spec)
    return spec


def _container(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]["securityContext"]


BASELINE_BREAKS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("privileged", lambda s: _container(s).update(privileged=True)),
    ("hostNamespaces", lambda s: s.update(hostPID=True)),
    ("hostPathVolumes", lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}})),
    ("hostPorts", lambda s: s["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}])),
    ("capabilities_baseline", lambda s: _container(s)["capabilities"].update(add=["SYS_ADMIN"])),
    ("appArmorProfile", lambda s: _container(s).update(appArmorProfile={"type": "Unconfined"})),
    ("seLinuxOptions", lambda s: s["securityContext"].update(seLinuxOptions={"type": "spc_t"})),
    ("procMount", lambda s: _container(s).update(procMount="Unmasked")),
    ("seccompProfile_baseline", lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"})),
    ("sysctls", lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}])),
    ("windowsHostProcess", lambda s: _container(s).update(windowsOptions={"hostProcess": True})),
]
RESTRICTED_BREAKS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("allowPrivilegeEscalation", lambda s: _container(s).pop("allowPrivilegeEscalation")),
    ("capabilities_restricted", lambda s: _container(s)["capabilities"].update(drop=["NET_RAW"])),
    ("restrictedVolumes", lambda s: s["volumes"].append({"name": "nfs", "nfs": {"server": "x", "path": "/"}})),
    ("runAsNonRoot", lambda s: s["securityContext"].pop("runAsNonRoot")),
    ("runAsUser", lambda s: _container(s).update(runAsUser=0)),
    ("seccompProfile_restricted", lambda s: s["securityContext"].pop("seccompProfile")),
]


def test_a_restricted_pod_passes_every_level() -> None:
    assert [evaluate(level, {}, RESTRICTED_POD) for level in ("privileged", "baseline", "restricted")] == [[], [], []]


@pytest.mark.parametrize("check, change", BASELINE_BREAKS, ids=[c for c, _ in BASELINE_BREAKS])
def test_baseline_checks(check: str, change: Callable[[dict[str, Any]], Any]) -> None:
    spec = with_(change)
    assert [f.check for f in evaluate("baseline", {}, spec)] == [check]
    assert evaluate("privileged", {}, spec) == []
    # restricted runs its own check in place of the three it overrides (policy/registry.go)
    overrides = {"hostPathVolumes": "restrictedVolumes", "capabilities_baseline": "capabilities_restricted",
                 "seccompProfile_baseline": "seccompProfile_restricted"}
    assert [f.check for f in evaluate("restricted", {}, spec)] == [overrides.get(check, check)]


@pytest.mark.parametrize("check, change", RESTRICTED_BREAKS, ids=[c for c, _ in RESTRICTED_BREAKS])
def test_restricted_checks(check: str, change: Callable[[dict[str, Any]], Any]) -> None:
    spec = with_(change)
    assert evaluate("baseline", {}, spec) == []
    assert [f.check for f in evaluate("restricted", {}, spec)] == [check]


def test_messages_follow_pod_security_admission() -> None:
    spec = with_(lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}}))
    (found,) = evaluate("restricted", {}, spec)
    assert found.render() == 'restricted volume types (volume "root" uses restricted volume type "hostPath")'
    (found,) = evaluate("restricted", {}, with_(lambda s: s["securityContext"].pop("runAsNonRoot")))
    assert found.detail == 'pod or container "app" must set securityContext.runAsNonRoot=true'
    # the deprecated AppArmor annotation still counts; the seccomp annotations stopped counting in 1.19
    annotations = {"container.apparmor.security.beta.kubernetes.io/app": "unconfined",
                   "seccomp.security.alpha.kubernetes.io/pod": "unconfined"}
    assert [f.check for f in evaluate("baseline", {"annotations": annotations}, RESTRICTED_POD)] == ["appArmorProfile"]


def test_baseline_allows_its_default_capabilities_and_restricted_only_net_bind_service() -> None:
    spec = with_(lambda s: _container(s)["capabilities"].update(add=["CHOWN", "NET_BIND_SERVICE"]))
    assert evaluate("baseline", {}, spec) == []
    assert [f.detail for f in evaluate("restricted", {}, spec)] == [
        'container "app" must not include "CHOWN" in securityContext.capabilities.add']
    assert len(checks("restricted")) == 14 and len(checks("baseline")) == 11


# --- the rule over a plan ---------------------------------------------------------------------------------------

def test_the_rule_is_part_of_slurm_eks_check() -> None:
    assert deploy.RULES["pod-security"](shipped_plan("dev"), None) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_pods_are_admitted(stack: str) -> None:
    plan = shipped_plan(stack)
    kinds = {t.urn.rpartition("::")[2].split("-")[1] for t in pod_security.pod_templates(plan)}
    assert {"login", "controller", "restapi", "accounting", "nodeset", "accounts"} <= kinds
    assert pod_security.check(plan) == []


def broken(kind: str, change: Callable[[dict[str, Any]], Any], name_part: str = "") -> Plan:
    plan = copy.deepcopy(shipped_plan("prod"))
    (target,) = [r for r in plan.resources if r.is_manifest and r.inputs["kind"] == kind and name_part in r.name]
    change(target.inputs)
    return plan


def test_a_login_pod_asking_for_host_access_in_the_slurm_namespace_is_rejected() -> None:
    plan = broken("LoginSet", lambda i: i["spec"]["template"]["spec"]["volumes"].append(
        {"name": "host", "hostPath": {"path": "/var/run"}}))
    (finding,) = pod_security.check(plan)
    assert finding.resource == "slurm-login (kubernetes:slinky.slurm.net/v1beta1:LoginSet)"
    assert "may mount a hostPath volume" in finding.message
    # the namespace enforces privileged: without the admission policy nothing would stop it
    plan.resources = [r for r in plan.resources if not (r.is_manifest and r.inputs["kind"].startswith(
        "ValidatingAdmissionPolicy"))]
    assert pod_security.check(plan) == []


def test_a_slurmd_pod_with_host_network_is_rejected() -> None:
    plan = copy.deepcopy(shipped_plan("prod"))
    nodesets = [r for r in plan.resources if r.is_manifest and r.inputs["kind"] == "NodeSet"]
    nodesets[0].inputs["spec"]["template"]["spec"]["hostNetwork"] = True
    (finding,) = pod_security.check(plan)
    assert "hostNetwork" in finding.message


def test_a_job_breaking_its_namespaces_level_is_named() -> None:
    def into_restricted(inputs: dict[str, Any]) -> None:
        inputs["metadata"]["namespace"] = "cert-manager"  # restricted: the repair's init step runs as root there

    plan = broken("Deployment", into_restricted, "repair")
    (finding,) = pod_security.check(plan)
    assert finding.resource.endswith("(kubernetes:apps/v1:Deployment)")
    assert "break Pod Security 'restricted'" in finding.message and "runAsNonRoot != true" in finding.message
