"""BioNeMo ESM-2 inference, one definition for both places it runs: a Kubernetes Job on a `kubernetesPools` entry
(`slurm-eks k8s render bionemo`: its pod placed and sized by scripts/k8s/render.py) and an sbatch script through
pyxis (`slurm-eks job bionemo`: jobs/templates/bionemo.sbatch.j2). Here: the pinned image, the entry point and its
arguments, where the weights come from, the checks of a request, and the Job and its container.

Upstream facts, all from NVIDIA/bionemo-framework at tag v2.7.1 (commit b4ea6f6b056fab00d0180c75f3701d3b8297d3ff),
the last release of the monolithic framework image (v3.0.0 became BioNeMo Recipes and "drops support for the
monolithic bionemo-framework container": github.com/NVIDIA-BioNeMo/bionemo-recipes/releases/tag/v3.0.0):

- the image: ci/scripts/build_docker_image.sh tags a release `nvcr.io/nvidia/clara/bionemo-framework:<VERSION>`
  (BIONEMO_VERSION read from ./VERSION, which is `2.7.1` at the tag; .github/ISSUE_TEMPLATE/bug-report.yml shows
  the form, `...:2.2`). That NGC serves `:2.7.1` cannot be checked offline; public projects pull it (e.g.
  PeptoneLtd/PepTron@3ce9c7df Dockerfile builds `FROM ...:2.7.1-arm`, its arm64 twin).
- the entry point: `infer_esm2 = "bionemo.esm2.scripts.infer_esm2:infer_esm2_entrypoint"`
  (sub-packages/bionemo-esm2/pyproject.toml [project.scripts]); its flags are get_parser() in
  sub-packages/bionemo-esm2/src/bionemo/esm2/scripts/infer_esm2.py (--checkpoint-path, --data-path and
  --results-path required; --num-gpus, --num-nodes, --precision, --include-embeddings, ...). It reads a CSV with a
  `sequences` (or `sequence`) column (esm2/model/finetune/dataset.py InMemoryProteinDataset.from_csv) and writes
  `predictions__rank_<r>__dp_rank_<d>.pt` into --results-path (bionemo-llm llm/utils/callbacks.py PredictionWriter).
- the weights: `download_bionemo_data = "bionemo.core.data.load:entrypoint"` (sub-packages/bionemo-core/
  pyproject.toml) prints the local path of a resource on stdout; `load()` in bionemo/core/data/load.py returns the
  cached path at once when the cache holds `<sha256>-<file>.checked`, and otherwise downloads into the cache. The
  cache is $BIONEMO_CACHE_DIR (bionemo/core/__init__.py _get_cache_dir). `esm2/650m:2.0` is the NeMo2 checkpoint
  of facebook/esm2_t33_650M_UR50D on NGC as `nvidia/clara/esm2nv650m:2.0` (bionemo/core/data/resources/esm2.yaml),
  the one the ESM-2 inference tutorial loads (sub-packages/bionemo-esm2/examples/inference.ipynb).

No ConfigMap: infer_esm2 takes flags only, no config file.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.config.cluster import ClusterConfig
from components.names import SHARED_MOUNT
from components.slinky.sizing import partition_threads_per_core
from jobs.render import BioNeMoSteps, RenderError, render_bionemo, target_for_partition

IMAGE = "nvcr.io/nvidia/clara/bionemo-framework:2.7.1"
ENTRY_POINT = "infer_esm2"
DOWNLOAD = "download_bionemo_data"
MODEL = "esm2/650m:2.0"
# The release image sets no USER (Dockerfile `FROM bionemo2-base AS release`, which runs as root), so a pod that
# must not run as root names a user: the base image's `ubuntu`, uid 1000 on Ubuntu 24.04, the OS of its base
# nvcr.io/nvidia/pytorch:25.06-py3 (Dockerfile BASE_IMAGE; its dev stage uses "the default ubuntu user" as
# "ubuntu 23 and later" have one). /workspace/bionemo2 is mode 777 in the release image (`chmod 777 -R`).
UID = 1000
CONTAINER = "bionemo"
CACHE_DIRECTORY = "bionemo"  # BIONEMO_CACHE_DIR is <the models' mount>/bionemo
# The Job's exit status when the weights are not in the cache: the pod reads /models only, so a retry cannot
# help; the Job's podFailurePolicy fails it at once on this status instead of retrying.
MODEL_NOT_LOADED_EXIT = 3
# What the renderers fill in from the pool or partition; a request may not set them.
DERIVED = ("--num-gpus", "--num-nodes")
# infer_esm2's options at v2.7.1 (get_parser); anything else would stop the job only once the image is pulled.
OPTIONS = (
    "--checkpoint-path", "--data-path", "--results-path", "--precision", "--num-gpus", "--num-nodes",
    "--micro-batch-size", "--pipeline-model-parallel-size", "--tensor-model-parallel-size", "--prediction-interval",
    "--include-hiddens", "--include-input-ids", "--include-embeddings", "--include-logits", "--config-class",
    "--lora-checkpoint-path", "--initial-ckpt-skip-keys-with-these-prefixes",
)
# infer_esm2's defaults, before the request's own flags: argparse keeps the last value of a repeated option, so
# a request's --precision replaces this one.
DEFAULTS = ("--precision", "bf16-mixed", "--include-embeddings")


class BioNeMoRequestError(ValueError):
    """A BioNeMo request that cannot run; the renderers pass the message on as their own error."""


@dataclass(frozen=True)
class InferRequest:
    """The infer_esm2 flags a request gives: its paths apart, the rest passed on as they are."""

    data: str
    results: str | None  # None: the renderer's default
    checkpoint: str | None  # None: MODEL from the BioNeMo cache on the models' file system
    extra: tuple[str, ...]


def models_mount(config: ClusterConfig, stack: str) -> str:
    """Where pods and job steps see the model file system (`storage.efs.mountPath`)."""
    if config.storage.efs is None:
        raise BioNeMoRequestError(
            f"storage.efs is not set in stacks/Pulumi.{stack}.yaml, so there is no model file system for BioNeMo's "
            f"weights ({MODEL}, read from $BIONEMO_CACHE_DIR on it). Fix: add `storage: {{efs: {{}}}}` to the stack "
            "and `pulumi up`, then load the weights once (docs/bionemo.md)")
    return config.storage.efs.mount_path


def cache_dir(mount: str) -> str:
    return f"{mount}/{CACHE_DIRECTORY}"


def infer_request(arguments: Sequence[str], shared: str, models: str) -> InferRequest:
    """The request from the arguments after `--`. A path must be absolute and on the file systems the pod or the
    container has: `shared` (/shared) or `models` (read-only: never the results); --data-path is required."""
    roots = {"--data-path": (shared, models), "--checkpoint-path": (shared, models), "--results-path": (shared,),
             "--lora-checkpoint-path": (shared, models)}
    paths: dict[str, str] = {}
    extra: list[str] = []
    rest = list(arguments)
    while rest:
        word = rest.pop(0)
        flag, equals, value = word.partition("=")
        if not flag.startswith("-"):  # the value of the option before it
            extra.append(word)
            continue
        if flag in DERIVED:
            raise BioNeMoRequestError(
                f"{flag} is set from the hardware (one process per GPU of every node). Fix: drop it from the "
                "arguments after `--`")
        if flag not in OPTIONS:
            raise BioNeMoRequestError(
                f"{flag}: not an option of {ENTRY_POINT} (BioNeMo 2.7.1). Fix: give its full name; its options: "
                f"{', '.join(o for o in OPTIONS if o not in DERIVED)}")
        if flag not in roots:
            extra.append(word)
            continue
        if not equals:
            if not rest:
                raise BioNeMoRequestError(f"{flag} needs a value. Fix: give {flag} PATH after `--`")
            value = rest.pop(0)
        value = _on_roots(flag, value, roots[flag])
        if flag == "--lora-checkpoint-path":  # passed on as it is, once checked
            extra += [flag, value]
        else:
            paths[flag] = value
    if "--data-path" not in paths:
        raise BioNeMoRequestError(
            "no input sequences: infer_esm2 needs --data-path. Fix: give it after `--`, e.g. `-- --data-path "
            "/shared/<you>/sequences.csv` (a CSV with a `sequences` column)")
    return InferRequest(paths["--data-path"], paths.get("--results-path"), paths.get("--checkpoint-path"),
                        tuple(extra))


def _on_roots(flag: str, path: str, roots: Sequence[str]) -> str:
    if not path.startswith("/") or ".." in path.split("/") or not any(path.startswith(f"{r}/") for r in roots):
        sees = "writes only to" if len(roots) == 1 else "sees only"
        raise BioNeMoRequestError(
            f"{flag} {path}: the job {sees} {' and '.join(roots)}. Fix: give an absolute path under "
            f"{' or '.join(roots)}")
    return path


def resolve_command() -> str:
    """Prints the local path of MODEL in $BIONEMO_CACHE_DIR (its log goes to stderr)."""
    return shlex.join([DOWNLOAD, "--source", "ngc", MODEL])


def infer_command(request: InferRequest, checkpoint: str, results: str, gpus: int, nodes: str) -> str:
    """infer_esm2's command line, a flag a line. `checkpoint`, `results` and `nodes` are shell words as they are
    (a quoted variable such as "${checkpoint}" is expanded where the line runs); the rest is quoted here."""
    return " \\\n  ".join([
        ENTRY_POINT, f"--checkpoint-path {checkpoint}", f"--data-path {shlex.quote(request.data)}",
        f"--results-path {results}", f"--num-gpus {gpus} --num-nodes {nodes}", shlex.join([*DEFAULTS, *request.extra]),
    ])


def inference_script(request: InferRequest, gpus: int, results: str) -> str:
    """The container's script on Kubernetes: find the weights (or fail with MODEL_NOT_LOADED_EXIT), then run
    infer_esm2 on one node; Lightning starts one process per GPU itself, as no cluster environment is set."""
    run = infer_command(request, '"${checkpoint}"', shlex.quote(results), gpus, "1")
    if request.checkpoint is not None:
        return f"set -euo pipefail\ncheckpoint={shlex.quote(request.checkpoint)}\nexec {run}\n"
    return (
        "set -euo pipefail\n"
        f"if ! checkpoint=\"$({resolve_command()})\"; then\n"
        f"  echo \"bionemo: {MODEL} is not in ${{BIONEMO_CACHE_DIR}}, which this pod only reads: load it once "
        "(docs/bionemo.md)\" >&2\n"
        f"  exit {MODEL_NOT_LOADED_EXIT}\n"
        "fi\n"
        f"exec {run}\n"
    )


def sbatch_steps(request: InferRequest, gpus: int, mount: str) -> BioNeMoSteps:
    """What jobs/templates/bionemo.sbatch.j2 runs: one task per GPU of every node (BioNeMo's own Slurm guide,
    docs/docs/main/getting-started/using-slurm.md at v2.7.1: `--ntasks-per-node=8`, `--devices=
    ${SLURM_NTASKS_PER_NODE}`, `--num-nodes=${SLURM_JOB_NUM_NODES}`), since Lightning under srun takes its ranks
    from Slurm and refuses devices other than the tasks per node (Lightning-AI/pytorch-lightning
    src/lightning/fabric/plugins/environments/slurm.py SLURMEnvironment.validate_settings)."""
    infer = infer_command(request, '"${checkpoint}"', '"${SLURM_EKS_RESULTS_DIR}"', gpus, '"${SLURM_NNODES}"')
    return BioNeMoSteps(infer=infer, resolve=None if request.checkpoint else resolve_command(),
                        checkpoint=request.checkpoint, results=request.results, cache=cache_dir(mount),
                        mounts=(mount,))


def container(request: InferRequest, image: str, gpus: int, results: str, mount: str,
              environment: list[dict[str, str]], resources: Mapping[str, Any]) -> dict[str, Any]:
    """The Job's one container. No CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES: the NVIDIA device plugin sets
    them for the GPUs it allocated, and NVIDIA_VISIBLE_DEVICES=all would hand the pod every GPU of the node."""
    env = [*environment, {"name": "BIONEMO_CACHE_DIR", "value": cache_dir(mount)},
           # Caches that follow $HOME (Triton's, NeMo's) land in the container's /tmp, whatever account the
           # image has for UID.
           {"name": "HOME", "value": "/tmp"}]
    return {"name": CONTAINER, "image": image, "command": ["/bin/bash", "-c", inference_script(request, gpus, results)],
            "env": env, "resources": dict(resources)}


def job(metadata: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """A batch/v1 Job of one pod. Retried twice for what a retry can fix; failed at once when the weights are
    missing; a pod evicted or preempted (its DisruptionTarget condition) does not count as a try. The Job pod
    failure policy (batch/v1 JobSpec.podFailurePolicy, stable since Kubernetes 1.31; the stacks run 1.33) requires
    restartPolicy Never (kubernetes/kubernetes pkg/apis/batch/validation/validation.go)."""
    policy = {"rules": [
        {"action": "FailJob",
         "onExitCodes": {"containerName": CONTAINER, "operator": "In", "values": [MODEL_NOT_LOADED_EXIT]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": {
        "backoffLimit": 2, "podFailurePolicy": policy,
        "template": {"spec": {**pod, "restartPolicy": "Never"}}}}


def sbatch_script(config: ClusterConfig, stack: str, partition: str, arguments: Sequence[str], nodes: int = 1,
                  time: str | None = None, job_name: str | None = None, image: str | None = None) -> str:
    """The sbatch script of `slurm-eks job bionemo`; a bad request raises jobs.render.RenderError."""
    target = target_for_partition(config, stack, partition, image or IMAGE)
    try:
        mount = models_mount(config, stack)
        request = infer_request(arguments, SHARED_MOUNT, mount)
    except BioNeMoRequestError as error:
        raise RenderError(str(error)) from None
    return render_bionemo(target, sbatch_steps(request, target.gpus_per_node, mount), nodes, time,
                          job_name or "bionemo-esm2", partition_threads_per_core(config.partitions[partition]))
