"""RayCluster, MPIJob, Volcano Queue + Job and a BioNeMo inference Job (batch/v1; its BioNeMo side in
scripts/k8s/bionemo.py) for one Kubernetes pool (`kubernetesPools.<name>`), as dicts the CLI writes as YAML. Field
names follow the CRDs in ../shared/crds (kuberay v1.7.0, mpi-operator v0.8.0, volcano v1.15.1) and Kubernetes
1.33's schemas; pods are placed with the pool's own nodeSelector and tolerations (components/compute/nodepools.py
pool_scheduling), request the node's devices (components/compute/scheduling.py device_requests) and the CPU and
memory a slurmd pod gets on the same node (components/slinky/specs.py slurmd_resources), and mount /shared and
the models in the `ml` namespace (components/addons/k8s_operators.py)."""

from __future__ import annotations

import dataclasses
import difflib
import shlex
from dataclasses import dataclass
from typing import Any

from components.catalog import InstanceType, Resources
from components.compute.nodepools import pool_scheduling
from components.compute.scheduling import (
    DEVICE_RESOURCES,
    device_requests,
    partition_efa_interfaces,
    partition_instance,
)
from components.config.cluster import ClusterConfig
from components.config.efs import model_volume
from components.config.k8s_pools import KubernetesPool
from components.kubernetes.namespaces import RESTRICTED_CONTAINER, RESTRICTED_POD
from components.names import ML_NAMESPACE, SHARED_MOUNT
from components.slinky.images import TRAINING_IMAGES
from components.slinky.sizing import slurmd_resources
from components.slinky.specs import (
    SHARED_VOLUME,
    SHARED_VOLUME_MOUNT,
    SHM_VOLUME,
    SHM_VOLUME_MOUNT,
    guaranteed,
)
from jobs.neuron_runtime import default_runtime
from scripts.k8s import bionemo
from scripts.k8s.environment import TemplateTarget, template_environment

RAY_API, MPI_API = "ray.io/v1", "kubeflow.org/v2beta1"
VOLCANO_BATCH_API, VOLCANO_SCHEDULING_API = "batch.volcano.sh/v1alpha1", "scheduling.volcano.sh/v1beta1"
# The Ray release kuberay v1.7.0's samples run (ray-operator/config/samples/ray-cluster.sample.yaml
# rayproject/ray:2.52.0); `-gpu` is Ray's CUDA image variant. That the tag exists cannot be checked offline.
RAY_VERSION = "2.52.0"
RAY_GPU_IMAGE = f"rayproject/ray:{RAY_VERSION}-gpu"
RAY_UID = 1000  # the `ray` user of Ray's images (ray docker/base-deps Dockerfile RAY_UID=1000)
# mpirun only starts the ranks: the launcher shares the first worker's node, and every worker leaves it room.
LAUNCHER = Resources(1000, 2048)
NOTHING = Resources(0, 0)
TORCHRUN_PORT = 29500  # torchrun's default --master-port (torch/distributed/run.py)
DEFAULT_WORKERS = 2  # ray, mpijob, volcano without --workers


class K8sRenderError(ValueError):
    """A request that cannot be rendered; the message names the config path and the fix."""


@dataclass(frozen=True)
class PoolTarget:
    stack: str
    name: str
    pool: KubernetesPool
    instance: InstanceType
    efa_interfaces: int
    config: ClusterConfig

    @property
    def devices(self) -> int:
        return self.instance.accelerators

    @property
    def device_resource(self) -> str:
        return DEVICE_RESOURCES[self.instance.accelerator]

    def environment(self) -> list[dict[str, str]]:
        """The sbatch templates' NCCL/EFA or Neuron environment for this pool's nodes."""
        runtime = default_runtime(self.instance.accelerator_model, None) if self.instance.neuron_cores else None
        env = template_environment(self.instance.accelerator, TemplateTarget(
            efa=self.efa_interfaces > 0, backend="nccl", shared_root="/shared",
            procs_per_node=self.instance.neuron_cores or self.devices, neuron_runtime=runtime))
        return [{"name": k, "value": v} for k, v in env.items()]


def pool_target(config: ClusterConfig, stack: str, name: str, need: str = "accelerator",
                why: str = "nccl-tests runs NCCL") -> PoolTarget:
    """`need`: "accelerator" (GPUs or Trainium) or "nvidia" (`why`: what needs NVIDIA GPUs)."""
    if name not in config.kubernetes_pools:
        close = difflib.get_close_matches(name, list(config.kubernetes_pools), n=1, cutoff=0.6)
        known = ", ".join(config.kubernetes_pools) or "none"
        raise K8sRenderError(
            f"stacks/Pulumi.{stack}.yaml has no kubernetesPools.{name}"
            + (f" (did you mean {close[0]!r}?)" if close else "")
            + f"; pools: {known}. Fix: pass --pool with one of them, or add kubernetesPools.{name} "
            "(instanceTypes, maxNodes) to the stack")
    pool = config.kubernetes_pools[name]
    instance = partition_instance(pool)
    if instance.accelerator == "none" or (need == "nvidia" and instance.accelerator != "nvidia"):
        what = f"NVIDIA GPUs ({why})" if need == "nvidia" else "GPUs or Trainium"
        raise K8sRenderError(
            f"kubernetesPools.{name}.instanceTypes {pool.instance_types} have no {what}. Fix: pick a pool of "
            f"{'p4d/p5/g5' if need == 'nvidia' else 'p4d/p5/g5/trn1/trn2'} instances with --pool")
    return PoolTarget(stack, name, pool, instance, partition_efa_interfaces(pool), config)


def _require_addon(target: PoolTarget, key: str) -> None:
    if getattr(target.config.addons, key) is None:
        yaml_key = {"mpi_operator": "mpiOperator"}.get(key, key)
        raise K8sRenderError(
            f"addons.{yaml_key} is not set in stacks/Pulumi.{target.stack}.yaml, so the cluster has no operator "
            f"for this object. Fix: add `addons: {{{yaml_key}: {{}}}}` to the stack and `pulumi up`")


def _workers(target: PoolTarget, workers: int) -> None:
    if not 1 <= workers <= target.pool.max_nodes:
        raise K8sRenderError(
            f"--workers {workers}: kubernetesPools.{target.name}.maxNodes is {target.pool.max_nodes}. Fix: "
            f"ask for 1 to {target.pool.max_nodes} workers, or raise maxNodes")


def pod_resources(target: PoolTarget, leave: Resources = NOTHING) -> dict[str, dict[str, str]]:
    """One pod per node, Guaranteed: the node's devices and what a slurmd pod gets there, less `leave`."""
    room = slurmd_resources(target.pool) - leave  # type: ignore[arg-type]  # the same instanceTypes field
    core = 1000 * target.instance.threads_per_core
    room = Resources(room.cpu_millis // core * core, room.memory_mib // 1024 * 1024)
    return guaranteed(room, device_requests(target.instance, target.efa_interfaces))


def _volumes(target: PoolTarget) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    models, model_mounts = model_volume(target.config.storage.efs)
    return [SHARED_VOLUME, SHM_VOLUME, *models], [SHARED_VOLUME_MOUNT, SHM_VOLUME_MOUNT, *model_mounts]


def _pod_spec(target: PoolTarget, containers: list[dict[str, Any]], run_as: int | None = None,
              **more: Any) -> dict[str, Any]:
    volumes, mounts = _volumes(target)
    security = {**RESTRICTED_POD, "runAsUser": run_as} if run_as is not None else None
    for c in containers:
        c.setdefault("volumeMounts", mounts)
        if security:
            c["securityContext"] = dict(RESTRICTED_CONTAINER)
    return {**pool_scheduling(target.name, target.pool), **({"securityContext": security} if security else {}),
            "containers": containers, "volumes": volumes, **more}


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": ML_NAMESPACE}


def ray_cluster(target: PoolTarget, workers: int, image: str | None = None) -> dict[str, Any]:
    """A RayCluster for Ray Train: the head and `workers - 1` worker pods, one per node, each with all of the
    node's devices (Ray Train places its workers on the head node too); no autoscaler (Karpenter scales)."""
    _require_addon(target, "kuberay")
    _workers(target, workers)
    if image is None and target.instance.accelerator != "nvidia":
        raise K8sRenderError(f"Ray publishes no Trainium image; kubernetesPools.{target.name} is "
                             f"{target.instance.accelerator_model}. Fix: pass --image with a Ray + torch-neuronx image")
    image = image or RAY_GPU_IMAGE
    resources = pod_resources(target)
    # Ray reads GPUs from the container's limits; Neuron cores are a custom resource (Ray's accelerator docs).
    start = {"dashboard-host": "0.0.0.0"} if target.instance.accelerator == "nvidia" else {
        "dashboard-host": "0.0.0.0", "resources": f'"{{\\"neuron_cores\\": {target.instance.neuron_cores}}}"'}

    def node(role: str) -> dict[str, Any]:
        container = {"name": f"ray-{role}", "image": image, "resources": resources, "env": target.environment()}
        return {"template": {"spec": _pod_spec(target, [container], run_as=RAY_UID)}, "rayStartParams": start}

    worker_group = {"groupName": "workers", "replicas": workers - 1, "minReplicas": workers - 1,
                    "maxReplicas": workers - 1, **node("worker")}
    return {"apiVersion": RAY_API, "kind": "RayCluster", "metadata": _meta(f"ray-{target.name}"),
            "spec": {"rayVersion": RAY_VERSION, "headGroupSpec": node("head"),
                     "workerGroupSpecs": [worker_group]}}


def mpi_job(target: PoolTarget, workers: int, image: str, binary: str = "all_reduce_perf") -> dict[str, Any]:
    """nccl-tests' all_reduce_perf over every GPU of `workers` nodes, with the sbatch templates' NCCL/EFA
    environment forwarded to each rank by mpirun (-x). `image` must hold nccl-tests, OpenMPI and sshd."""
    _require_addon(target, "mpi_operator")
    _workers(target, workers)
    env = target.environment()
    ranks = workers * target.devices
    forward = " ".join(f"-x {e['name']}" for e in env)
    command = (f"mpirun --allow-run-as-root -np {ranks} -npernode {target.devices} --bind-to none {forward} "
               f"{shlex.quote(binary)} -b 8 -e 8G -f 2 -g 1")
    launcher = {"name": "launcher", "image": image, "command": ["/bin/bash", "-c", command], "env": env,
                "resources": guaranteed(LAUNCHER)}
    worker = {"name": "worker", "image": image, "command": ["/usr/sbin/sshd", "-De"],
              "resources": pod_resources(target, leave=LAUNCHER)}
    return {"apiVersion": MPI_API, "kind": "MPIJob", "metadata": _meta(f"nccl-tests-{target.name}"), "spec": {
        "slotsPerWorker": target.devices,
        "mpiImplementation": "OpenMPI",
        "launcherCreationPolicy": "WaitForWorkersReady",
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {
                **_pod_spec(target, [launcher]), "restartPolicy": "OnFailure"}}},
            "Worker": {"replicas": workers, "template": {"spec": _pod_spec(target, [worker])}},
        }}}


def node_capacity(target: PoolTarget) -> dict[str, str]:
    """What one node of the pool has (catalog): vCPUs, memory, devices, EFA interfaces."""
    return {"cpu": str(target.instance.vcpu), "memory": f"{target.instance.memory_gib}Gi",
            **device_requests(target.instance, target.efa_interfaces)}


def volcano_queue(target: PoolTarget) -> dict[str, Any]:
    """A Queue capped at the pool's capacity: maxNodes x one node's resources."""
    _require_addon(target, "volcano")
    one = node_capacity(target)
    nodes = target.pool.max_nodes
    capability = {"cpu": str(nodes * target.instance.vcpu), "memory": f"{nodes * target.instance.memory_gib}Gi",
                  **{k: str(nodes * int(v)) for k, v in one.items() if k not in ("cpu", "memory")}}
    return {"apiVersion": VOLCANO_SCHEDULING_API, "kind": "Queue", "metadata": {"name": target.name},
            "spec": {"weight": 1, "reclaimable": False, "capability": capability}}


def volcano_job(target: PoolTarget, workers: int, entry: list[str], image: str | None = None) -> dict[str, Any]:
    """A gang-scheduled Job: all `workers` pods start together or none (minAvailable), each running torchrun
    for its node; the svc plugin gives the pods stable names (<job>-worker-<i>.<job>), the env plugin
    VC_TASK_INDEX (volcano v1.15.1 pkg/controllers/job/plugins/{svc/svc.go GenerateHosts,env/const.go})."""
    _require_addon(target, "volcano")
    _workers(target, workers)
    name = f"gang-{target.name}"
    procs = target.instance.neuron_cores or target.devices
    torchrun = (f"torchrun --nnodes={workers} --nproc-per-node={procs} --node-rank=${{VC_TASK_INDEX}} "
                f"--master-addr={name}-worker-0.{name} --master-port={TORCHRUN_PORT} "
                + " ".join(shlex.quote(a) for a in entry))
    container = {"name": "worker", "image": image or TRAINING_IMAGES[target.instance.accelerator],
                 "command": ["/bin/bash", "-c", torchrun], "env": target.environment(),
                 "resources": pod_resources(target)}
    return {"apiVersion": VOLCANO_BATCH_API, "kind": "Job", "metadata": _meta(name), "spec": {
        "schedulerName": "volcano",
        "queue": target.name,
        "minAvailable": workers,
        "maxRetry": 3,
        "plugins": {"svc": [], "env": []},
        # One lost pod restarts the whole gang: torchrun's world is fixed.
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}, {"event": "PodFailed", "action": "RestartJob"}],
        "tasks": [{"name": "worker", "replicas": workers, "minAvailable": workers,
                   "template": {"spec": {**_pod_spec(target, [container]), "restartPolicy": "Never"}}}],
    }}


def bionemo_job(target: PoolTarget, workers: int | None = None, image: str | None = None,
                entry: list[str] | None = None) -> dict[str, Any]:
    """BioNeMo ESM-2 inference (scripts/k8s/bionemo.py) as a Job of one pod on one node of the pool, with all of its
    GPUs, in the `ml` namespace with /shared, the models and /dev/shm, under the restricted Pod Security level."""
    if workers not in (None, 1):
        raise K8sRenderError(
            f"--workers {workers}: bionemo renders one pod on one node (infer_esm2 starts a process per GPU itself). "
            f"Fix: drop --workers; for several nodes run it on Slurm (`slurm-eks job bionemo --nodes {workers}`)")
    if not target.config.addons.batch_operators:
        raise K8sRenderError(
            f"stacks/Pulumi.{target.stack}.yaml turns on no batch operator (addons.kuberay, mpiOperator or volcano), "
            f"so the cluster has no `{ML_NAMESPACE}` namespace with the /shared and model claims this Job mounts. "
            "Fix: add one, e.g. `addons: {volcano: {}}`, and `pulumi up`")
    try:
        mount = bionemo.models_mount(target.config, target.stack)
        request = bionemo.infer_request(entry or [], SHARED_MOUNT, mount)
    except bionemo.BioNeMoRequestError as error:
        raise K8sRenderError(str(error)) from None
    name = f"bionemo-esm2-{target.name}"
    # One node: NCCL stays on it (NVLink), so no EFA interfaces and no EFA settings (their NCCL_NET would fail the
    # start if the image lacks aws-ofi-nccl, which nothing offline can show).
    one_node = dataclasses.replace(target, efa_interfaces=0)
    results = request.results or f"{SHARED_MOUNT}/bionemo/results/{name}"
    container = bionemo.container(request, image or bionemo.IMAGE, target.devices, results, mount,
                                  one_node.environment(), pod_resources(one_node))
    return bionemo.job(_meta(name), _pod_spec(target, [container], run_as=bionemo.UID))


def render(kind: str, config: ClusterConfig, stack: str, pool: str, workers: int | None = None,
           image: str | None = None, entry: list[str] | None = None) -> list[dict[str, Any]]:
    """The objects of `kind` ("ray", "mpijob", "volcano", "bionemo") for `pool`; `workers` defaults to
    DEFAULT_WORKERS (bionemo: one)."""
    if kind == "bionemo":
        why = "BioNeMo's image runs on CUDA"
        return [bionemo_job(pool_target(config, stack, pool, need="nvidia", why=why), workers, image, entry)]
    workers = DEFAULT_WORKERS if workers is None else workers
    if kind == "ray":
        return [ray_cluster(pool_target(config, stack, pool), workers, image)]
    if kind == "mpijob":
        target = pool_target(config, stack, pool, need="nvidia")
        if not image:
            raise K8sRenderError("mpijob needs --image: an image with nccl-tests, OpenMPI and sshd (no pinned "
                                 "public one exists; build one from aws-samples/awsome-distributed-training "
                                 "micro-benchmarks/nccl-tests/nccl-tests.Dockerfile and pin its tag)")
        return [mpi_job(target, workers, image)]
    if kind == "volcano":
        target = pool_target(config, stack, pool)
        return [volcano_queue(target), volcano_job(target, workers, entry or ["/shared/train.py"], image)]
    raise K8sRenderError(f"unknown kind {kind!r}: ray, mpijob, volcano or bionemo")
