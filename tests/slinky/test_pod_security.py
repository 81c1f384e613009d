"""Pod Security on every namespace: labelled Namespaces that every Release waits for, the slurm namespace's host
access policy evaluated with the project's CEL evaluator against pods as the Slinky operator makes them, login pods
on the login node group, and root running no job."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.kubernetes.namespaces import NAME_LABEL, POD_SECURITY, PREFIX, VERSION
from components.names import LOGIN_NODE_SELECTOR, LOGIN_TAINT, SLURM_NAMESPACE
from components.slinky import host_access
from components.slinky.health_settings import DCGM_JOB_MAP_DIR
from scripts.checks.admission_policy import Request, rejections
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import RELEASE, objects, releases

NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
SLURM_LABELS = {NAME_LABEL: SLURM_NAMESPACE}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_namespace_is_labelled_and_every_release_waits_for_its_own(stack: str) -> None:
    plan = shipped_plan(stack)
    namespaces = {r.inputs["metadata"]["name"]: r for r in plan.of_type(NAMESPACE_TYPE)}
    for name, namespace in namespaces.items():
        labels = namespace.inputs["metadata"]["labels"]
        level = POD_SECURITY[name]
        assert labels == {f"{PREFIX}/enforce": level.enforce, f"{PREFIX}/warn": level.warn,
                          f"{PREFIX}/audit": level.audit, **{f"{PREFIX}/{m}-version": VERSION
                                                             for m in ("enforce", "warn", "audit")}}
    for release in plan.of_type(RELEASE):
        where = release.inputs["namespace"]
        assert "createNamespace" not in release.inputs, release.name
        if where != "kube-system":
            assert namespaces[where].urn in release.dependencies, f"{release.name} does not wait for {where}"
    # Every namespace a chart or an object lives in is ours (labelled), and each of ours holds something.
    used = ({r.inputs["namespace"] for r in releases(plan).values()}
            | {m["metadata"]["namespace"] for m in plan.manifests() if m["metadata"].get("namespace")})
    assert used - {"kube-system"} == set(namespaces) and SLURM_NAMESPACE in used


def test_only_slurmd_and_node_exporter_namespaces_are_privileged() -> None:
    assert {n for n, p in POD_SECURITY.items() if p.enforce == "privileged"} == {"slurm", "monitoring"}
    assert all(p.reason for p in POD_SECURITY.values())


# --- the host access policy, as the API server would evaluate it -----------------------------------------------

def policy_objects() -> tuple[dict[str, Any], dict[str, Any]]:
    plan = shipped_plan("prod")
    policy = objects(plan, "ValidatingAdmissionPolicy")[host_access.POLICY]
    binding = objects(plan, "ValidatingAdmissionPolicyBinding")[host_access.POLICY]
    return policy, binding


def slurmd_pod() -> dict[str, Any]:
    """A NodeSet pod as slurm-operator v1.2.1 builds it (workerbuilder/worker_app.go, nodeset/utils/utils.go)."""
    return {
        "metadata": {"name": "gpu-h100-0", "namespace": SLURM_NAMESPACE,
                     "labels": {**host_access.WORKER_LABELS, "app.kubernetes.io/instance": "gpu-h100"},
                     "ownerReferences": [{"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
                                          "name": "gpu-h100", "uid": "1", "controller": True}]},
        "spec": {
            "containers": [{"name": "slurmd", "image": "slurmd",
                            "securityContext": copy.deepcopy(host_access.SLURMD_SECURITY_CONTEXT)}],
            "initContainers": [{"name": "logfile", "image": "slurmd", "restartPolicy": "Always"},
                               {"name": "identity", "image": "slurmd"}],
            "volumes": [{"name": "slurm-etc", "projected": {"sources": []}},
                        {"name": "slurm-logfile", "emptyDir": {"medium": "Memory"}}]},
    }


def login_pod() -> dict[str, Any]:
    return {"metadata": {"name": "login-0", "namespace": SLURM_NAMESPACE,
                         "labels": {"app.kubernetes.io/name": "login", "app.kubernetes.io/component": "login"}},
            "spec": {"containers": [{"name": "login", "image": "login"}],
                     "volumes": [{"name": "shared", "persistentVolumeClaim": {"claimName": "fsx-shared"}}]}}


def denied(pod: dict[str, Any], user: str = host_access.OPERATOR_USER, operation: str = "CREATE",
           resource: str = "pods") -> list[str]:
    policy, binding = policy_objects()
    return rejections(policy, binding, pod, Request(operation, resource, user, SLURM_LABELS))


def test_the_operators_slurmd_pod_is_admitted_and_a_plain_login_pod_too() -> None:
    assert denied(slurmd_pod()) == []
    assert denied(login_pod(), user="system:serviceaccount:kube-system:replicaset-controller") == []


def _host_path(pod: dict[str, Any]) -> None:
    pod["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}})


def _host_network(pod: dict[str, Any]) -> None:
    pod["spec"]["hostNetwork"] = True


def _host_port(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 22, "hostPort": 2222}]


def _privileged(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}


def _capability(pod: dict[str, Any]) -> None:
    pod["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["NET_RAW"]}}


@pytest.mark.parametrize("change, message", [
    (_host_path, "hostPath"), (_host_network, "hostNetwork"), (_host_port, "hostPort"),
    (_privileged, "may be privileged"), (_capability, "may add capabilities"),
], ids=["hostPath", "hostNetwork", "hostPort", "privileged", "capabilities"])
def test_a_login_pod_asking_for_host_access_is_rejected(change: Any, message: str) -> None:
    pod = login_pod()
    change(pod)
    found = denied(pod, user="system:serviceaccount:kube-system:replicaset-controller")
    assert len(found) == 1 and message in found[0], found


def test_slurmd_gets_what_the_operator_gives_it_and_nothing_more() -> None:
    for change in (_host_path, _host_network):  # no host access the operator does not give
        pod = slurmd_pod()
        change(pod)
        assert denied(pod)
    more = slurmd_pod()
    more["spec"]["containers"][0]["securityContext"]["capabilities"]["add"].append("SYS_PTRACE")
    assert any("only BPF" in m for m in denied(more))
    sidecar = slurmd_pod()  # privilege belongs to the slurmd container alone
    sidecar["spec"]["initContainers"][0]["securityContext"] = {"privileged": True}
    assert any("may be privileged" in m for m in denied(sidecar))


def test_a_copy_of_a_slurmd_pod_by_anyone_but_the_operator_is_rejected() -> None:
    assert denied(slurmd_pod(), user="alice")
    orphan = slurmd_pod()  # made by the operator's account but owned by no NodeSet
    orphan["metadata"].pop("ownerReferences")
    assert denied(orphan)
    unlabelled = slurmd_pod()
    unlabelled["metadata"]["labels"]["app.kubernetes.io/component"] = "login"
    assert denied(unlabelled)


def test_kubectl_debug_gets_no_privilege_on_any_pod() -> None:
    def debug(pod: dict[str, Any], privileged: bool) -> dict[str, Any]:
        pod["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox",
                                               "securityContext": {"privileged": privileged}}]
        return pod

    def by_admin(pod: dict[str, Any]) -> list[str]:
        return denied(pod, user="admin", operation="UPDATE", resource="pods/ephemeralcontainers")

    assert by_admin(debug(slurmd_pod(), privileged=False)) == []  # slurmd's own privilege is not the request's
    assert by_admin(debug(slurmd_pod(), privileged=True))
    assert by_admin(debug(login_pod(), privileged=True))


def test_the_policy_applies_to_the_slurm_namespace_only() -> None:
    policy, binding = policy_objects()
    pod = login_pod()
    _host_path(pod)
    request = Request("CREATE", "pods", "alice", {NAME_LABEL: "default"})
    assert rejections(policy, binding, pod, request) == []


# --- placement and jobs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_login_pods_run_on_the_login_node_group_and_the_accounts_job_on_system_nodes(stack: str) -> None:
    plan = shipped_plan(stack)
    (login,) = objects(plan, "LoginSet").values()
    template = login["spec"]["template"]["spec"]
    assert template["nodeSelector"] == LOGIN_NODE_SELECTOR
    assert {"operator": "Equal", **LOGIN_TAINT} in template["tolerations"]
    jobs = objects(plan, "Job").values()
    assert jobs and all(job["spec"]["template"]["spec"]["nodeSelector"] == SYSTEM_NODE_SELECTOR for job in jobs)


def test_root_runs_no_job() -> None:
    (controller,) = objects(shipped_plan("dev"), "Controller").values()
    assert "DisableRootJobs=YES\n" in controller["spec"]["extraConf"]


def test_the_dcgm_job_map_is_the_one_hostpath_and_only_for_slurmd() -> None:
    """The prolog writes dcgm-exporter's job mapping on the node (components/slinky/node_health.py)."""
    job_map = {"name": "dcgm-job-map", "hostPath": {"path": DCGM_JOB_MAP_DIR, "type": "DirectoryOrCreate"}}
    pod = slurmd_pod()
    pod["spec"]["volumes"].append(job_map)
    assert denied(pod) == []
    elsewhere = copy.deepcopy(pod)
    elsewhere["spec"]["volumes"][-1]["hostPath"]["path"] = "/var/run"
    assert denied(elsewhere)
    login = login_pod()
    login["spec"]["volumes"].append(job_map)
    assert denied(login, user="system:serviceaccount:kube-system:replicaset-controller")
