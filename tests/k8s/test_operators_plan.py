"""The prod plan's batch operators (KubeRay, MPI Operator, Volcano) at their pinned versions on the system nodes,
the `ml` namespace with both claims, and the pod-network rule on the jobs' flows (shown to fire)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from components.addons import k8s_operators
from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.config.stackfile import load_stack
from components.findings_render import render_text
from components.upstream import UpstreamError
from components.upstream import read as read_upstream
from scripts.checks import pod_flows
from scripts.checks.pod_security_standards import evaluate
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import shipped_plan
from tests.policy.broken import resource
from tests.slinky.helpers import objects, releases

CRDS = Path("/work/shared/crds") if Path("/work/shared/crds").is_dir() else Path(__file__).parents[3] / "shared/crds"


@pytest.fixture(scope="module")
def plan() -> Plan:  # the cached shipped plan, shared with tests/plan
    return shipped_plan("prod")


def test_the_operators_are_released_at_the_crds_versions_on_system_nodes(plan: Plan) -> None:
    found = releases(plan)
    assert (found["kuberay-operator"].inputs["chart"], found["kuberay-operator"].inputs["version"]) == (
        "kuberay-operator", "1.7.0")
    assert found["kuberay-operator"].inputs["values"]["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert (found["volcano"].inputs["chart"], found["volcano"].inputs["version"]) == ("volcano", "1.15.1")
    assert found["volcano"].inputs["values"]["custom"]["default_ns"] == SYSTEM_NODE_SELECTOR
    deployment = objects(plan, "Deployment")["mpi-operator"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert pod["containers"][0]["image"] == "mpioperator/mpi-operator:0.8.0"
    assert evaluate("restricted", {}, pod) == []


def test_the_mpijob_crd_applied_is_the_one_tests_validate_against(plan: Plan) -> None:
    applied = objects(plan, "CustomResourceDefinition")["mpijobs.kubeflow.org"]
    upstream = yaml.safe_load((CRDS / "mpi-operator" / "kubeflow.org_mpijobs.yaml").read_text())
    assert applied["spec"] == upstream["spec"]


def test_a_changed_manifest_is_refused(tmp_path: Path) -> None:
    # The release manifest comes from the upstream cache (components/upstream.py, tests/test_upstream.py).
    pinned = k8s_operators.MPI_OPERATOR_MANIFEST
    changed = tmp_path / pinned.path
    changed.parent.mkdir(parents=True)
    changed.write_bytes(read_upstream(pinned).replace(b":0.8.0", b":latest"))
    with pytest.raises(UpstreamError, match=rf"{changed} has sha256 \w+, not the pinned {pinned.sha256}"):
        k8s_operators.mpi_operator_objects(cache=tmp_path)


def test_the_ml_namespace_holds_both_claims(plan: Plan) -> None:
    namespace = objects(plan, "Namespace")["ml"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    claims = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in plan.manifests()
              if d["kind"] == "PersistentVolumeClaim"}
    assert {("ml", "fsx-shared"), ("ml", "efs-models")} <= claims
    for ns in ("kuberay", "mpi-operator", "volcano-system", "ml"):
        assert any(d["kind"] == "NetworkPolicy" and d["metadata"] == {"name": "default-deny", "namespace": ns}
                   for d in plan.manifests()), ns


def test_the_jobs_flows_pass_and_fire_when_broken(plan: Plan) -> None:
    config = load_stack("prod")[0]
    assert render_text(pod_flows.check(plan, config)) == ""
    no_peers = copy.deepcopy(plan)
    no_peers.resources = [r for r in no_peers.resources if not (
        r.type == pod_flows.NETWORK_POLICY and r.inputs["metadata"] == {"name": "allow-same-namespace",
                                                                        "namespace": "ml"})]
    assert "an MPIJob launcher -> an MPIJob worker (tcp 1-65535)" in {
        f.resource for f in pod_flows.check(no_peers, config)}
    open_all = copy.deepcopy(plan)
    open_all.resources.append(resource(pod_flows.NETWORK_POLICY, "allow-all", {
        "metadata": {"name": "allow-all", "namespace": "ml"},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}}))
    found = {f.resource for f in pod_flows.check(open_all, config)}
    assert {"a Ray worker -> IMDS (tcp 80)", "an MPIJob worker -> the EKS control plane (tcp 443)"} <= found
