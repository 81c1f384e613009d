"""`slurm-eks k8s render bionemo`: the BioNeMo inference Job validates against Kubernetes 1.33's strict schemas, lands
only on the pool with its GPUs, meets the restricted Pod Security level, mounts /shared, the models and /dev/shm,
runs the pinned image's infer_esm2 with the weights from the models' cache (its script run here against stand-ins),
and refuses bad requests in one line with exit status 2."""

from __future__ import annotations

import copy
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from components.compute.nodepools import POOL_LABEL, pool_taints
from components.config.k8s_pools import KubernetesPool
from components.config.stackfile import load_stack
from scripts.checks.pod_security_standards import evaluate
from scripts.cli.main import app
from scripts.k8s import bionemo
from scripts.k8s.render import K8sRenderError, pod_resources, pool_target, render
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from tests.conftest import require_tool

REPO = Path(__file__).resolve().parents[2]
DATA = ["--data-path", "/shared/alice/sequences.csv"]


@pytest.fixture(scope="module")
def prod() -> Any:
    return load_stack("prod")[0]


@pytest.fixture(scope="module")
def job(prod: Any) -> dict[str, Any]:
    (only,) = render("bionemo", prod, "prod", "ml-h100", entry=DATA)
    return only


def _pod(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]


def _container(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = _pod(job)["containers"]
    return container


def _script(job: dict[str, Any]) -> str:
    command = _container(job)["command"]
    assert command[:2] == ["/bin/bash", "-c"]
    return command[2]


def test_the_job_validates_against_the_kubernetes_schemas(job: dict[str, Any], crd_registry: SchemaRegistry) -> None:
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert crd_registry.lookup("batch/v1", "Job") is None  # a built-in kind: the strict core schemas check it
    assert validate_manifest(job, crd_registry) == []


def test_a_broken_job_fails_the_schemas(job: dict[str, Any], crd_registry: SchemaRegistry) -> None:
    unknown = copy.deepcopy(job)
    _container(unknown)["gpus"] = 8  # no such field: strict validation, as the API server's
    assert validate_manifest(unknown, crd_registry)
    wrong = copy.deepcopy(job)
    wrong["spec"]["backoffLimit"] = "two"
    assert validate_manifest(wrong, crd_registry)


def test_the_pod_lands_only_on_the_pool_its_taints_tolerated(prod: Any, job: dict[str, Any]) -> None:
    pool = prod.kubernetes_pools["ml-h100"]
    pod = _pod(job)
    assert pod["nodeSelector"] == {POOL_LABEL: "ml-h100"}
    taints = pool_taints("ml-h100", pool)
    assert len(taints) == 2  # the pool's own taint and the GPU taint
    assert pod["tolerations"] == [{"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]}
                                  for t in taints]
    assert job["metadata"] == {"name": "bionemo-esm2-ml-h100", "namespace": "ml"}


def test_it_asks_for_the_nodes_gpus_and_the_cpu_and_memory_the_other_kinds_use(prod: Any, job: dict[str, Any]
                                                                              ) -> None:
    resources = _container(job)["resources"]
    assert resources["requests"] == resources["limits"]  # Guaranteed
    assert resources["requests"]["nvidia.com/gpu"] == "8"
    # One node: no EFA interfaces (NCCL stays on NVLink), else what a volcano worker gets on the same node.
    assert "vpc.amazonaws.com/efa" not in resources["requests"]
    other = pod_resources(pool_target(prod, "prod", "ml-h100"))
    assert other["requests"]["vpc.amazonaws.com/efa"] == "32"
    assert {k: v for k, v in other["requests"].items() if k != "vpc.amazonaws.com/efa"} == resources["requests"]


def test_volumes_are_shared_the_models_read_only_and_shm_in_memory(job: dict[str, Any]) -> None:
    pod = _pod(job)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == "fsx-shared"
    assert volumes["models"]["persistentVolumeClaim"] == {"claimName": "efs-models", "readOnly": True}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory"}
    mounts = {m["mountPath"]: m for m in _container(job)["volumeMounts"]}
    assert set(mounts) == {"/shared", "/models", "/dev/shm"}
    assert mounts["/models"]["readOnly"] is True


def test_the_pod_meets_restricted_and_runs_as_the_images_user(job: dict[str, Any]) -> None:
    pod = _pod(job)
    assert evaluate("restricted", {}, pod) == []
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == bionemo.UID
    broken = copy.deepcopy(pod)
    del broken["securityContext"]["runAsUser"]
    broken["securityContext"]["runAsNonRoot"] = False
    assert evaluate("restricted", {}, broken)


def test_the_image_is_pinned_to_a_release_tag(job: dict[str, Any]) -> None:
    image = _container(job)["image"]
    assert image == bionemo.IMAGE
    assert re.fullmatch(r"nvcr\.io/nvidia/clara/bionemo-framework:2\.\d+\.\d+", image)  # never nightly or latest
    (other,) = render("bionemo", load_stack("prod")[0], "prod", "ml-h100", image="registry.example.com/bionemo:2.7.1",
                      entry=DATA)
    assert _container(other)["image"] == "registry.example.com/bionemo:2.7.1"


def test_the_environment_leaves_gpus_to_the_device_plugin(job: dict[str, Any]) -> None:
    env = {e["name"]: e["value"] for e in _container(job)["env"]}
    assert env["BIONEMO_CACHE_DIR"] == "/models/bionemo"
    assert env["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"
    # NVIDIA_VISIBLE_DEVICES=all would hand the pod every GPU of the node; one node needs no EFA settings.
    assert not {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NCCL_NET"} & set(env)
    assert not [name for name in env if name.startswith("FI_")]


def test_a_missing_model_fails_the_job_at_once_and_disruptions_do_not_count(job: dict[str, Any]) -> None:
    spec = job["spec"]
    assert spec["backoffLimit"] == 2 and _pod(job)["restartPolicy"] == "Never"  # Never: podFailurePolicy needs it
    fail, ignore = spec["podFailurePolicy"]["rules"]
    assert fail == {"action": "FailJob", "onExitCodes": {
        "containerName": _container(job)["name"], "operator": "In", "values": [bionemo.MODEL_NOT_LOADED_EXIT]}}
    assert ignore == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


def test_the_container_script_is_shellcheck_clean(job: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "bionemo.sh"
    path.write_text("#!/bin/bash\n" + _script(job))
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    result = subprocess.run([require_tool("shellcheck"), "--severity=style", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def _standins(tmp_path: Path, cached: bool) -> dict[str, str]:
    """download_bionemo_data and infer_esm2 as the image has them: the first prints the cached checkpoint's path
    (or fails, as load() does on a cache it cannot write), the second records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    download = bin_dir / "download_bionemo_data"
    download.write_text("#!/bin/bash\necho \"$*\" > \"$LOG/download\"\n"
                        + ('echo "$BIONEMO_CACHE_DIR/0798-esm2_650M_nemo2.tar.gz.untar"\n' if cached else
                           "echo 'OSError: [Errno 30] Read-only file system' >&2\nexit 1\n"))
    infer = bin_dir / "infer_esm2"
    infer.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$LOG/infer"\n')
    for tool in (download, infer):
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(tmp_path), "BIONEMO_CACHE_DIR": "/models/bionemo"}


def test_the_script_runs_infer_esm2_on_the_cached_weights(job: dict[str, Any], tmp_path: Path) -> None:
    env = _standins(tmp_path, cached=True)
    result = subprocess.run(["bash", "-c", _script(job)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "download").read_text().split() == ["--source", "ngc", "esm2/650m:2.0"]
    args = (tmp_path / "infer").read_text().splitlines()
    assert args == ["--checkpoint-path", "/models/bionemo/0798-esm2_650M_nemo2.tar.gz.untar",
                    "--data-path", "/shared/alice/sequences.csv",
                    "--results-path", "/shared/bionemo/results/bionemo-esm2-ml-h100",
                    "--num-gpus", "8", "--num-nodes", "1", "--precision", "bf16-mixed", "--include-embeddings"]


def test_weights_missing_from_the_cache_exit_with_the_status_that_fails_the_job(job: dict[str, Any],
                                                                               tmp_path: Path) -> None:
    result = subprocess.run(["bash", "-c", _script(job)], env=_standins(tmp_path, cached=False),
                            capture_output=True, text=True)
    assert result.returncode == bionemo.MODEL_NOT_LOADED_EXIT
    assert "esm2/650m:2.0 is not in /models/bionemo" in result.stderr and "docs/bionemo.md" in result.stderr
    assert not (tmp_path / "infer").exists()


def test_a_given_checkpoint_and_arguments_pass_through(prod: Any, tmp_path: Path) -> None:
    entry = ["--data-path=/models/sets/s.csv", "--checkpoint-path", "/shared/alice/ft ckpt", "--micro-batch-size",
             "16", "--precision", "32", "--results-path", "/shared/alice/out", "--lora-checkpoint-path=/shared/l"]
    (custom,) = render("bionemo", prod, "prod", "ml-a10g", entry=entry)
    assert _container(custom)["resources"]["requests"]["nvidia.com/gpu"] == "1"  # g5.xlarge
    result = subprocess.run(["bash", "-c", _script(custom)], env=_standins(tmp_path, cached=True),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "download").exists()  # the checkpoint is given: nothing to look up
    args = (tmp_path / "infer").read_text().splitlines()
    assert args[:10] == ["--checkpoint-path", "/shared/alice/ft ckpt", "--data-path", "/models/sets/s.csv",
                         "--results-path", "/shared/alice/out", "--num-gpus", "1", "--num-nodes", "1"]
    # The request's flags come after the defaults: argparse keeps the last --precision.
    assert args[10:] == ["--precision", "bf16-mixed", "--include-embeddings", "--micro-batch-size", "16",
                         "--precision", "32", "--lora-checkpoint-path", "/shared/l"]


@pytest.mark.parametrize(("entry", "message"), [
    ([], r"no input sequences: infer_esm2 needs --data-path\. Fix:"),
    (["--data-path", "seqs.csv"], r"--data-path seqs\.csv: the job sees only /shared and /models\. Fix:"),
    (["--data-path", "/shared/../etc/passwd"], r"the job sees only /shared and /models"),
    (["--data-path", "/data/x.csv"], r"the job sees only"),
    ([*DATA, "--results-path", "/models/out"], r"--results-path /models/out: the job writes only to /shared\. Fix:"),
    ([*DATA, "--num-gpus", "4"], r"--num-gpus is set from the hardware .* Fix: drop it"),
    ([*DATA, "--num-nodes=2"], r"--num-nodes is set from the hardware"),
    ([*DATA, "--checkpoint-path"], r"--checkpoint-path needs a value\. Fix:"),
    ([*DATA, "--micro-batch", "4"], r"--micro-batch: not an option of infer_esm2 \(BioNeMo 2\.7\.1\)\. Fix: .*"
                                    r"--micro-batch-size"),
    ([*DATA, "-o", "out"], r"-o: not an option of infer_esm2"),
    ([*DATA, "--lora-checkpoint-path", "lora"], r"--lora-checkpoint-path lora: the job sees only"),
])
def test_bad_arguments_are_refused(prod: Any, entry: list[str], message: str) -> None:
    with pytest.raises(K8sRenderError, match=message):
        render("bionemo", prod, "prod", "ml-h100", entry=entry)


def test_pools_and_stacks_it_cannot_run_on_are_refused_with_the_fix(prod: Any) -> None:
    with pytest.raises(K8sRenderError, match=r"kubernetesPools\.ml-trn1\.instanceTypes .* no NVIDIA GPUs "
                                             r"\(BioNeMo's image runs on CUDA\)\. Fix: pick a pool of p4d/p5/g5"):
        render("bionemo", prod, "prod", "ml-trn1", entry=DATA)
    trn2 = prod.model_copy(update={"kubernetes_pools": {
        "trn2": KubernetesPool.model_validate({"instanceTypes": ["trn2.48xlarge"], "maxNodes": 1})}})
    with pytest.raises(K8sRenderError, match=r"kubernetesPools\.trn2\.instanceTypes \['trn2\.48xlarge'\] have no "):
        render("bionemo", trn2, "prod", "trn2", entry=DATA)
    with pytest.raises(K8sRenderError, match=r"--workers 2: bionemo renders one pod .* --nodes 2"):
        render("bionemo", prod, "prod", "ml-h100", 2, entry=DATA)
    no_efs = prod.model_copy(update={"storage": prod.storage.model_copy(update={"efs": None})})
    with pytest.raises(K8sRenderError, match=r"storage\.efs is not set in stacks/Pulumi\.prod\.yaml.*Fix"):
        render("bionemo", no_efs, "prod", "ml-h100", entry=DATA)
    no_ml = prod.model_copy(update={"addons": prod.addons.model_copy(
        update={"kuberay": None, "mpi_operator": None, "volcano": None})})
    with pytest.raises(K8sRenderError, match=r"no `ml` namespace .* Fix: add one"):
        render("bionemo", no_ml, "prod", "ml-h100", entry=DATA)
    assert render("bionemo", prod, "prod", "ml-h100", 1, entry=DATA)  # --workers 1 is what it renders anyway


def test_the_cli_writes_the_job_as_yaml_with_the_script_as_a_block() -> None:
    result = CliRunner().invoke(app, ["k8s", "render", "bionemo", "--pool", "ml-h100", "--stack", "prod", "--",
                                      *DATA])
    assert result.exit_code == 0, result.output
    (document,) = yaml.safe_load_all(result.stdout)
    assert document["kind"] == "Job" and "&id" not in result.stdout
    assert "- |\n" in result.stdout and "exec infer_esm2 \\\n" in result.stdout
    assert _script(document) == _script(render("bionemo", load_stack("prod")[0], "prod", "ml-h100", entry=DATA)[0])


@pytest.mark.parametrize("args", [
    ["--pool", "ml-trn1"], ["--pool", "nope"], ["--pool", "ml-h100", "--workers", "3"], ["--pool", "ml-h100"]])
def test_the_cli_refuses_in_one_line_with_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(app, ["k8s", "render", "bionemo", "--stack", "prod", *args, "--",
                                      *(DATA if args != ["--pool", "ml-h100"] else [])])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.startswith("error: ")
    assert len(result.output.strip().splitlines()) == 1 and "Fix:" in result.output


def test_the_other_kinds_still_default_to_two_workers(prod: Any) -> None:
    (_, gang) = render("volcano", prod, "prod", "ml-h100")
    assert gang["spec"]["minAvailable"] == 2


def test_the_documented_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `slurm-eks` line of docs/bionemo.md's bash blocks, up to a pipe or redirect, exits 0 (in a scratch
    directory: `-o FILE` writes there)."""
    monkeypatch.chdir(tmp_path)
    page = (REPO / "docs" / "bionemo.md").read_text()
    lines = [line.strip() for block in re.findall(r"^```bash\n(.*?)^```", page, re.M | re.S)
             for line in block.splitlines() if line.strip().startswith("slurm-eks ")]
    commands = [re.split(r"\s[|>]\s?", line.split(" # ")[0])[0] for line in lines if "<" not in line.split(" # ")[0]]
    assert any(c.startswith("slurm-eks k8s render bionemo") for c in commands)
    assert any(c.startswith("slurm-eks job bionemo") for c in commands)
    for command in commands:
        result = CliRunner().invoke(app, shlex.split(command)[1:])
        assert result.exit_code == 0, f"{command}: {result.output}"
