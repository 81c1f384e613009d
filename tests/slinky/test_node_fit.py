"""slurmd pods are Guaranteed, fill their node without overfilling it, and Slurm schedules no more CPU or memory
than the pod has.

The pod is built as SlinkyProject/slurm-operator v1.2.1 builds it (internal/builder/workerbuilder/worker_app.go
BuildWorkerPodTemplate): the `slurmd` container, and the `logfile` sidecar (a restartable init container,
internal/builder/common/common.go LogfileContainer), each merged with its NodeSet field; then the pod template.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from components import catalog
from components.config.cluster import ClusterConfig
from components.slinky.sizing import DAEMONSET_REQUESTS, slurm_cpus, slurmd_resources
from components.slinky.specs import nodeset_spec
from scripts.checks.eviction import MIB, qos_class, quantity, slinky_pod
from scripts.offline.plan_model import Plan
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, objects, plan_of, trainium_only, variant

# Allocatable CPU (millicores) and memory (MiB) per type, as Karpenter publishes them
# (aws/karpenter-provider-aws v1.14.1, website/content/en/docs/reference/instance-types.md, "Resources").
KARPENTER_ALLOCATABLE: dict[str, tuple[int, int]] = {
    "p4d.24xlarge": (95690, 1082712), "p4de.24xlarge": (95690, 1082712),
    "p5.48xlarge": (191450, 1938410), "p5e.48xlarge": (191450, 1938410), "p5en.48xlarge": (191450, 1937332),
    "trn1.32xlarge": (127610, 481894), "trn1n.32xlarge": (127610, 481894), "trn2.48xlarge": (191450, 1938410),
    "g5.xlarge": (3920, 14162), "g5.12xlarge": (47810, 173400), "g5.48xlarge": (191450, 723299),
}
def pod_requests(pod: dict[str, Any]) -> tuple[Decimal, Decimal]:
    """(cpu cores, memory bytes) the scheduler reserves: containers plus restartable init containers
    (sidecars run beside them)."""
    containers = [*pod["containers"], *(c for c in pod["initContainers"] if c.get("restartPolicy") == "Always")]
    total = [sum((quantity(c["resources"]["requests"].get(r, "0")) for c in containers), Decimal(0))
             for r in ("cpu", "memory")]
    return total[0], total[1]


def one_partition_per_type() -> ClusterConfig:
    """Every catalog type as a partition of its own, with EFA where the type has it."""
    raw = raw_config("prod")
    raw["partitions"] = {name.replace(".", "-"): {"instanceTypes": [name], "maxNodes": 1, "efa": it.has_efa}
                         for name, it in catalog.CATALOG.items()}
    return ClusterConfig.model_validate(raw)


@pytest.fixture(scope="module", params=["dev", "prod", "trainium-only"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Plan, ClusterConfig]:
    """A plan and the config it was made from."""
    if request.param == "trainium-only":
        raw = variant("prod", trainium_only)
        return plan_of(raw, tmp_path_factory.mktemp("trn")), config_of(raw)
    return shipped_plan(request.param), config_of(raw_config(request.param))


def test_allocatable_is_what_karpenter_plans_with() -> None:
    for name, instance in catalog.CATALOG.items():
        node = catalog.allocatable(instance)
        assert (node.cpu_millis, node.memory_mib) == KARPENTER_ALLOCATABLE[name], name


def test_slurmd_pods_are_guaranteed(stack: tuple[Plan, ClusterConfig]) -> None:
    for name, nodeset in objects(stack[0], "NodeSet").items():
        pod = slinky_pod(nodeset)
        assert qos_class(pod) == "Guaranteed", name
        for container in [*pod["containers"], *pod["initContainers"]]:
            assert container["resources"]["requests"] == container["resources"]["limits"], name


def test_an_unsized_container_would_not_be_guaranteed() -> None:
    nodeset = next(iter(objects(shipped_plan("prod"), "NodeSet").values()))
    pod = slinky_pod(nodeset)
    pod["initContainers"][0].pop("resources")
    assert qos_class(pod) == "Burstable"
    pod["containers"][0]["resources"] = {}
    for init in pod["initContainers"][1:]:  # the identity init container (prod declares people)
        init.pop("resources")
    assert qos_class(pod) == "BestEffort"


def _fits(nodeset: dict[str, Any], instance_type: str) -> None:
    cpu, memory = pod_requests(slinky_pod(nodeset))
    cpu_millis = cpu * 1000 + sum(d.cpu_millis for d in DAEMONSET_REQUESTS.values())
    memory_mib = memory / MIB + sum(d.memory_mib for d in DAEMONSET_REQUESTS.values())
    node_cpu, node_memory = KARPENTER_ALLOCATABLE[instance_type]
    assert cpu_millis <= node_cpu and memory_mib <= node_memory, instance_type
    # Near the node's size: less than two cores and two GiB stay free for everything else.
    assert node_cpu - cpu_millis < 2000 and node_memory - memory_mib < 2048, instance_type


def test_slurmd_fits_every_catalog_type() -> None:
    config = one_partition_per_type()
    for name, partition in config.partitions.items():
        _fits({"spec": nodeset_spec(name, config)}, partition.instance_types[0])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_slurmd_fits_each_type_of_its_partition(stack: str) -> None:
    config, nodesets = config_of(raw_config(stack)), objects(shipped_plan(stack), "NodeSet")
    for name, partition in config.partitions.items():
        for instance_type in partition.instance_types:
            _fits(nodesets[name], instance_type)


def slurm_schedulable(nodeset: dict[str, Any], instance: catalog.InstanceType, real_memory_mib: int
                      ) -> tuple[int, int]:
    """(CPUs, MiB) Slurm hands out on the node. The operator passes the slurmd container's limits as POD_CPUS
    (whole CPUs, rounded up) and POD_MEMORY (MiB) (worker_app.go getResourceLimits); Slinky's image turns them
    into CoreSpecCount = cores - POD_CPUS / threads and MemSpecLimit = RealMemory - POD_MEMORY, where
    `slurmd -C` reports the host (SlinkyProject/containers 05efda08
    schedmd/slurm/25.11/ubuntu24.04/files/usr/local/bin/slurmd-entrypoint.sh)."""
    limits = nodeset["spec"]["slurmd"]["resources"]["limits"]
    pod_cpus = math.ceil(quantity(limits["cpu"])) if "cpu" in limits else 0
    pod_memory = int(quantity(limits["memory"]) // MIB) if "memory" in limits else 0
    threads, cores = instance.threads_per_core, instance.cpu_cores
    core_spec = max(cores - pod_cpus // threads, 0) if pod_cpus else 0
    mem_spec = max(real_memory_mib - pod_memory, 0) if pod_memory else 0
    return (cores - core_spec) * threads, real_memory_mib - mem_spec


def test_slurm_schedules_no_more_than_the_pod_has(stack: tuple[Plan, ClusterConfig]) -> None:
    plan, config = stack
    (controller,) = objects(plan, "Controller").values()
    slurm_conf = dict(line.split("=", 1) for line in controller["spec"]["extraConf"].splitlines())
    assert "Memory" in slurm_conf["SelectTypeParameters"]  # MemSpecLimit only holds when memory is consumable
    for name, nodeset in objects(plan, "NodeSet").items():
        # Node sizes in --conf would be subtracted from again by the image's CoreSpecCount/MemSpecLimit.
        keys = {item.split("=", 1)[0] for item in nodeset["spec"].get("extraConf", "").split()}
        assert not keys & {"CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory",
                           "CoreSpecCount", "CpuSpecList", "MemSpecLimit"}, name
        limits = nodeset["spec"]["slurmd"]["resources"]["limits"]
        for instance_type in config.partitions[name].instance_types:
            instance = catalog.lookup(instance_type)
            # `slurmd -C` sees the host's memory: somewhere between Karpenter's estimate and the nominal size.
            for real_memory in (KARPENTER_ALLOCATABLE[instance_type][1], instance.memory_gib * 1024):
                cpus, memory = slurm_schedulable(nodeset, instance, real_memory)
                assert memory * MIB <= quantity(limits.get("memory", "0")), (name, instance_type)
                assert cpus == quantity(limits.get("cpu", "0")), (name, instance_type)  # every CPU, no more
                # components/slinky/sizing.py says the same, and the job renderer asks for exactly that.
                assert cpus == slurm_cpus(config.partitions[name]), (name, instance_type)


def test_an_unsized_slurmd_lets_slurm_schedule_the_whole_host() -> None:
    nodeset = objects(shipped_plan("prod"), "NodeSet")["gpu-h100"]
    bare = {"spec": {**nodeset["spec"], "slurmd": {**nodeset["spec"]["slurmd"], "resources": {"limits": {}}}}}
    p5 = catalog.lookup("p5.48xlarge")
    assert slurm_schedulable(bare, p5, 2048 * 1024) == (192, 2048 * 1024)



# The figures the components' comments cite, in (millicores, MiB):
AWS_NODE = (25, 0)  # aws-vpc-cni v1.23.0 values.yaml: aws-node 25m, no memory; its node agent nothing
KUBE_PROXY = (100, 0)  # EKS's kube-proxy add-on: 100m
CSI_NODE = (10 + 10 + 10, 40 + 32 + 32)  # EBS and FSx CSI charts: node 10m/40Mi, two sidecars 10m/32Mi each
EFA_PLUGIN = (10, 20)  # aws-efa-k8s-device-plugin v0.5.20 values.yaml: 10m/20Mi
HEADROOM = (0, 512)  # memory left for the DaemonSets that request none (device plugins, node-exporter)
LOGFILE_SIDECAR = (100, 32)
# Everything on a partition node besides slurmd: 295m and 772 MiB.
OVERHEAD = catalog.Resources(
    AWS_NODE[0] + KUBE_PROXY[0] + 2 * CSI_NODE[0] + EFA_PLUGIN[0] + HEADROOM[0] + LOGFILE_SIDECAR[0],
    AWS_NODE[1] + KUBE_PROXY[1] + 2 * CSI_NODE[1] + EFA_PLUGIN[1] + HEADROOM[1] + LOGFILE_SIDECAR[1])


def test_daemonset_budget_is_what_the_cited_charts_request() -> None:
    cited = {"aws-node": catalog.Resources(*AWS_NODE), "kube-proxy": catalog.Resources(*KUBE_PROXY),
             "ebs-csi-node": catalog.Resources(*CSI_NODE), "fsx-csi-node": catalog.Resources(*CSI_NODE),
             "aws-efa-k8s-device-plugin": catalog.Resources(*EFA_PLUGIN)}
    assert cited == DAEMONSET_REQUESTS
    assert (OVERHEAD.cpu_millis, OVERHEAD.memory_mib) == (295, 772)


def _slurmd_amounts(cpu: str, memory: str, devices: dict[str, str]) -> dict[str, dict[str, str]]:
    amounts = {"cpu": cpu, "memory": memory, **devices}
    return {"requests": amounts, "limits": dict(amounts)}


def test_prod_slurmd_requests_worked_out_by_hand() -> None:
    """Karpenter's allocatable less 295m/772 MiB, rounded down to whole cores (2 threads) and whole GiB."""
    config = config_of(raw_config("prod"))
    resources = {name: nodeset_spec(name, config)["slurmd"]["resources"] for name in config.partitions}
    # p5.48xlarge: 191450m - 295m = 191155m, 95 whole cores = 190 CPUs; 1938410 - 772 = 1937638 MiB,
    # 1892 GiB (1892 * 1024 = 1937408, 230 MiB left over).
    assert (191450 - 295) // 2000 * 2 == 190 and (1938410 - 772) // 1024 == 1892
    assert resources["gpu-h100"] == _slurmd_amounts("190", "1892Gi", {"nvidia.com/gpu": "8",
                                                                     "vpc.amazonaws.com/efa": "32"})
    # p4d/p4de.24xlarge: 95690m - 295m = 95395m, 47 cores = 94 CPUs; 1082712 - 772 = 1081940 MiB, 1056 GiB.
    assert (95690 - 295) // 2000 * 2 == 94 and (1082712 - 772) // 1024 == 1056
    assert resources["gpu-a100"] == _slurmd_amounts("94", "1056Gi", {"nvidia.com/gpu": "8",
                                                                    "vpc.amazonaws.com/efa": "4"})
    # trn1/trn1n.32xlarge: 127610m - 295m = 127315m, 63 cores = 126 CPUs; 481894 - 772 = 481122 MiB, 469 GiB.
    assert (127610 - 295) // 2000 * 2 == 126 and (481894 - 772) // 1024 == 469
    assert resources["trainium"] == _slurmd_amounts("126", "469Gi", {"aws.amazon.com/neuron": "16",
                                                                    "vpc.amazonaws.com/efa": "8"})


def test_dev_slurmd_on_a_g5_worked_out_by_hand() -> None:
    config = config_of(raw_config("dev"))
    (name,) = [n for n, p in config.partitions.items() if p.instance_types == ["g5.12xlarge"]]
    # g5.12xlarge: 47810m - 295m = 47515m, 23 whole cores = 46 CPUs; 173400 - 772 = 172628 MiB, 168 GiB.
    assert (47810 - 295) // 2000 * 2 == 46 and (173400 - 772) // 1024 == 168
    limits = nodeset_spec(name, config)["slurmd"]["resources"]["limits"]
    assert (limits["cpu"], limits["memory"]) == ("46", "168Gi")


def test_logfile_sidecar_is_sized_as_cited() -> None:
    config = config_of(raw_config("prod"))
    want = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "32Mi"}}
    for name in config.partitions:
        assert nodeset_spec(name, config)["logfile"]["resources"] == want, name
    (controller,) = objects(shipped_plan("prod"), "Controller").values()
    assert controller["spec"]["logfile"]["resources"] == want


def test_slurmd_takes_every_whole_core_and_gib_the_node_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter's allocatable moves with kube-reserved settings; wherever it lands, slurmd gets what is left
    after the overheads down to the last whole core and GiB, and never a millicore or MiB more."""
    config = config_of(raw_config("prod"))
    partition = config.partitions["gpu-h100"]
    whole = catalog.Resources(95 * 2000, 1892 * 1024)
    monkeypatch.setattr(catalog, "allocatable", lambda _: OVERHEAD + whole)
    assert slurmd_resources(partition) == whole
    monkeypatch.setattr(catalog, "allocatable", lambda _: OVERHEAD + whole - catalog.Resources(1, 1))
    assert slurmd_resources(partition) == catalog.Resources(94 * 2000, 1891 * 1024)
