"""`slurm-eks k8s render`: each object validates against the upstream CRDs, its pods land only on the pool and
request its devices, the NCCL/EFA environment is the sbatch template's, and bad requests exit 2."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from components.compute.nodepools import POOL_LABEL, pool_taints
from components.config.k8s_pools import KubernetesPool
from components.config.stackfile import load_stack
from scripts.checks.pod_security_standards import evaluate
from scripts.cli.main import app
from scripts.k8s.environment import TemplateTarget, template_environment
from scripts.k8s.render import K8sRenderError, pool_target, render
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest

IMAGE = "example.com/nccl-tests:2.17.6-efa1.46"


@pytest.fixture(scope="module")
def prod() -> Any:
    return load_stack("prod")[0]


def _pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]
    if obj["kind"] == "RayCluster":
        return [spec["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in spec["workerGroupSpecs"])]
    if obj["kind"] == "MPIJob":
        return [r["template"]["spec"] for r in spec["mpiReplicaSpecs"].values()]
    if obj["kind"] == "Job":
        return [t["template"]["spec"] for t in spec["tasks"]]
    return []


@pytest.fixture(scope="module")
def rendered(prod: Any) -> list[dict[str, Any]]:
    return [*render("ray", prod, "prod", "ml-h100", 2), *render("mpijob", prod, "prod", "ml-h100", 2, IMAGE),
            *render("volcano", prod, "prod", "ml-h100", 2)]


def test_every_object_validates_against_the_crds(rendered: list[dict[str, Any]], crd_registry: SchemaRegistry
                                                 ) -> None:
    assert [o["kind"] for o in rendered] == ["RayCluster", "MPIJob", "Queue", "Job"]
    for obj in rendered:
        assert crd_registry.lookup(obj["apiVersion"], obj["kind"]) is not None, obj["kind"]
        assert validate_manifest(obj, crd_registry) == [], obj["kind"]


def test_a_broken_object_fails_the_crd(rendered: list[dict[str, Any]], crd_registry: SchemaRegistry) -> None:
    broken = copy.deepcopy(rendered[1])
    broken["spec"]["mpiImplementation"] = "OpenMPI5"  # not in the CRD's enum
    assert validate_manifest(broken, crd_registry)
    queue = copy.deepcopy(rendered[2])
    queue["spec"]["weight"] = 0  # minimum 1
    assert validate_manifest(queue, crd_registry)


def test_pods_land_only_on_the_pool_and_request_its_devices(prod: Any, rendered: list[dict[str, Any]]) -> None:
    pool = prod.kubernetes_pools["ml-h100"]
    taints = {(t["key"], t["value"]) for t in pool_taints("ml-h100", pool)}
    for obj in rendered:
        for pod in _pods(obj):
            assert pod["nodeSelector"] == {POOL_LABEL: "ml-h100"}
            assert {(t["key"], t["value"]) for t in pod["tolerations"]} == taints
            claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
            assert claims == {"fsx-shared", "efs-models"}
    job = rendered[1]["spec"]["mpiReplicaSpecs"]
    worker = job["Worker"]["template"]["spec"]["containers"][0]["resources"]
    assert worker["requests"]["nvidia.com/gpu"] == "8" and worker["requests"]["vpc.amazonaws.com/efa"] == "32"
    assert worker["requests"] == worker["limits"]
    assert rendered[0]["metadata"]["namespace"] == rendered[1]["metadata"]["namespace"] == "ml"


def test_the_queue_holds_the_pool_capacity_and_the_job_is_a_gang(prod: Any, rendered: list[dict[str, Any]]) -> None:
    pool = prod.kubernetes_pools["ml-h100"]  # p5.48xlarge: 192 vCPU, 2048 GiB, 8 GPUs, 32 EFA
    assert rendered[2]["spec"]["capability"] == {
        "cpu": str(192 * pool.max_nodes), "memory": f"{2048 * pool.max_nodes}Gi",
        "nvidia.com/gpu": str(8 * pool.max_nodes), "vpc.amazonaws.com/efa": str(32 * pool.max_nodes)}
    job = rendered[3]["spec"]
    assert job["minAvailable"] == 2 and job["schedulerName"] == "volcano" and job["queue"] == "ml-h100"


def test_the_mpijob_carries_the_sbatch_templates_environment(rendered: list[dict[str, Any]]) -> None:
    expected = template_environment("nvidia", TemplateTarget(True, "nccl", "/shared", 8))
    assert {"FI_EFA_USE_HUGE_PAGE", "NCCL_SOCKET_IFNAME"} <= set(expected)
    launcher = rendered[1]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in launcher["env"]} == expected
    command = launcher["command"][-1]
    assert all(f"-x {name}" in command for name in expected) and "all_reduce_perf" in command
    assert "-np 16 -npernode 8" in command


def test_ray_and_volcano_pods_meet_restricted_and_every_pod_baseline(rendered: list[dict[str, Any]]) -> None:
    for obj in rendered:
        for pod in _pods(obj):
            assert evaluate("baseline", {}, pod) == [], obj["kind"]
    for pod in _pods(rendered[0]):
        assert evaluate("restricted", {}, pod) == []
    broken = copy.deepcopy(_pods(rendered[0])[0])
    broken["containers"][0]["securityContext"] = {"privileged": True}
    assert evaluate("baseline", {}, broken)


def test_render_errors_name_the_config_path_and_the_fix(prod: Any) -> None:
    with pytest.raises(K8sRenderError, match=r"no kubernetesPools\.ml-h10 .*did you mean 'ml-h100'.*Fix"):
        pool_target(prod, "prod", "ml-h10")
    cpu = prod.model_copy(update={"kubernetes_pools": {
        "cpu": KubernetesPool.model_validate({"instanceTypes": ["g5.xlarge"], "maxNodes": 1})}})
    with pytest.raises(K8sRenderError, match="mpijob needs --image"):
        render("mpijob", prod, "prod", "ml-h100", 1)
    with pytest.raises(K8sRenderError, match=r"--workers 99: kubernetesPools\.ml-h100\.maxNodes"):
        render("ray", prod, "prod", "ml-h100", 99)
    no_addon = prod.model_copy(update={"addons": prod.addons.model_copy(update={"volcano": None})})
    with pytest.raises(K8sRenderError, match=r"addons\.volcano is not set.*Fix"):
        render("volcano", no_addon, "prod", "ml-h100", 1)
    assert pool_target(cpu, "prod", "cpu").devices == 1  # g5.xlarge has a GPU: fine for every kind


def test_a_trainium_pool_is_refused_for_nccl_tests(prod: Any) -> None:
    trn = prod.model_copy(update={"kubernetes_pools": {
        "trn": KubernetesPool.model_validate({"instanceTypes": ["trn1.32xlarge"], "maxNodes": 2})}})
    with pytest.raises(K8sRenderError, match=r"kubernetesPools\.trn\.instanceTypes .* no NVIDIA GPUs"):
        render("mpijob", trn, "prod", "trn", 1, IMAGE)
    (queue, job) = render("volcano", trn, "prod", "trn", 2)
    assert queue["spec"]["capability"]["aws.amazon.com/neuron"] == "32"
    env = {e["name"] for e in job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]}
    assert "NEURON_CC_FLAGS" in env


def test_the_cli_writes_yaml_and_exits_2_without_a_traceback() -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["k8s", "render", "volcano", "--pool", "ml-h100", "--stack", "prod", "--workers", "2"])
    assert ok.exit_code == 0, ok.output
    assert [d["kind"] for d in yaml.safe_load_all(ok.stdout)] == ["Queue", "Job"]
    assert "&id" not in ok.stdout
    bad = runner.invoke(app, ["k8s", "render", "ray", "--pool", "nope", "--stack", "prod"])
    assert bad.exit_code == 2 and "kubernetesPools.nope" in bad.output and "Traceback" not in bad.output
