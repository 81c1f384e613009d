"""Kubernetes pools (`kubernetesPools`): built by the partitions' builder, with labels and taints that keep
slurmd pods off them and their pods off the partitions' nodes; device plugins and the network check reach
them. Scheduling is evaluated as the kube-scheduler does for what these objects use: a pod fits a node when
its nodeSelector is a subset of the node's labels and it tolerates every NoSchedule taint."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.catalog import lookup
from components.compute.device_plugins import EFA, NEURON, NVIDIA, plugin_values
from components.compute.nodepools import (
    POOL_LABEL,
    node_pool_spec,
    partition_kind,
    pool_kind,
    pool_scheduling,
    pool_taints,
)
from components.compute.scheduling import PARTITION_LABEL, node_taints
from components.config.cluster import ClusterConfig
from components.config.k8s_pools import KubernetesPool
from components.config.stackfile import load_stack
from scripts.checks import network
from scripts.offline.plan_model import Plan
from tests.device_plugins.test_device_plugins import _affinity_admits, _efa_admits, _tolerated
from tests.plan.fixtures import shipped_plan

POOL = "ml-h100"


def _prod() -> ClusterConfig:
    return load_stack("prod")[0]


def _docs(plan: Plan | list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    manifests = plan if isinstance(plan, list) else plan.manifests()
    return {m["metadata"]["name"]: m for m in manifests if m["kind"] == kind}


def _node(pool: dict[str, Any]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The labels and taints every node of this NodePool gets."""
    template = pool["spec"]["template"]
    return template["metadata"]["labels"], template["spec"].get("taints", [])


def _fits(pod: dict[str, Any], labels: dict[str, str], taints: list[dict[str, str]]) -> bool:
    selector = pod.get("nodeSelector", {})
    return (all(labels.get(k) == v for k, v in selector.items())
            and all(_tolerated(pod.get("tolerations", []), t) for t in taints if t["effect"] == "NoSchedule"))


def crossings(manifests: list[dict[str, Any]], config: ClusterConfig) -> list[str]:
    """Every (pod, node) pair that breaks the split: a slurmd pod that fits a pool's node, or a pool's pod that
    fits a partition's node."""
    pools, node_sets = _docs(manifests, "NodePool"), _docs(manifests, "NodeSet")
    found = []
    for pool_name, pool in ((n, p) for n, p in pools.items() if n in config.kubernetes_pools):
        labels, taints = _node(pool)
        for set_name, node_set in node_sets.items():
            pod = node_set["spec"]["template"]["spec"]
            if _fits(pod, labels, taints):
                found.append(f"slurmd of {set_name} fits a node of pool {pool_name}")
        pod = pool_scheduling(pool_name, config.kubernetes_pools[pool_name])
        for partition in config.partitions:
            if _fits(pod, *_node(pools[partition])):
                found.append(f"a pod of pool {pool_name} fits a node of partition {partition}")
    return found


def test_slurm_and_pool_pods_never_share_nodes() -> None:
    plan, config = shipped_plan("prod"), _prod()
    assert config.kubernetes_pools and crossings(plan.manifests(), config) == []
    pools, node_sets = _docs(plan, "NodePool"), _docs(plan, "NodeSet")
    labels, taints = _node(pools[POOL])
    for node_set in node_sets.values():
        pod = node_set["spec"]["template"]["spec"]
        # Both walls hold on their own: the selector misses the pool's labels and the taint is not tolerated.
        assert not all(labels.get(k) == v for k, v in pod["nodeSelector"].items())
        assert not _tolerated(pod["tolerations"], taints[0])
    for partition in config.partitions:
        assert POOL_LABEL not in _node(pools[partition])[0]
    # Not vacuous: each side fits its own nodes.
    assert _fits(pool_scheduling(POOL, config.kubernetes_pools[POOL]), labels, taints)
    assert all(_fits(node_sets[p]["spec"]["template"]["spec"], *_node(pools[p])) for p in config.partitions)


def test_a_pool_labelled_like_a_partition_is_caught() -> None:
    """The defect the split guards against: a pool given a partition's labels and taints (a copied builder)."""
    manifests, config = copy.deepcopy(shipped_plan("prod").manifests()), _prod()
    doc = _docs(manifests, "NodePool")[POOL]
    kind = partition_kind("gpu-h100", config.kubernetes_pools[POOL])
    doc["spec"]["template"]["metadata"]["labels"], doc["spec"]["template"]["spec"]["taints"] = kind.labels, kind.taints
    assert crossings(manifests, config) == [f"slurmd of gpu-h100 fits a node of pool {POOL}"]
    # And the other way: a partition's nodes that carried the pool's label would take the pool's pods.
    manifests = copy.deepcopy(shipped_plan("prod").manifests())
    _docs(manifests, "NodePool")["gpu-a100"]["spec"]["template"]["metadata"]["labels"][POOL_LABEL] = POOL
    _docs(manifests, "NodePool")["gpu-a100"]["spec"]["template"]["spec"]["taints"] = pool_taints(
        POOL, config.kubernetes_pools[POOL])
    assert crossings(manifests, config) == [f"a pod of pool {POOL} fits a node of partition gpu-a100"]


def test_a_pool_is_the_partition_builder_with_its_own_labels_and_taints() -> None:
    config = _prod()
    pool = config.kubernetes_pools[POOL]
    built = _docs(shipped_plan("prod"), "NodePool")[POOL]["spec"]
    assert built == node_pool_spec(POOL, pool, config, pool_kind(POOL, pool))
    as_partition = node_pool_spec(POOL, pool, config)
    template = built["template"]
    assert template["metadata"]["labels"] == {POOL_LABEL: POOL, "node.slurm-eks.io/accelerator": "nvidia",
                                              "nvidia.com/gpu.present": "true"}
    assert template["spec"]["taints"] == [{"key": POOL_LABEL, "value": POOL, "effect": "NoSchedule"},
                                          {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    # Everything else is the partition's: requirements (EFA zone), limits, disruption, expiry.
    assert _without_labels_and_taints(built) == _without_labels_and_taints(as_partition)
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    assert requirements["topology.kubernetes.io/zone"] == ["us-west-2a"]
    assert built["limits"] == {"cpu": "384", "memory": "4096Gi", "nvidia.com/gpu": "16"}
    h100 = _docs(shipped_plan("prod"), "NodePool")["gpu-h100"]["spec"]["disruption"]
    assert built["disruption"] == {**h100, "consolidateAfter": "30m"}


def _without_labels_and_taints(spec: dict[str, Any]) -> dict[str, Any]:
    return {**spec, "template": {"spec": {k: v for k, v in spec["template"]["spec"].items() if k != "taints"}}}


def test_a_pool_node_class_is_tagged_as_the_pool_and_placed_for_efa() -> None:
    spec = _docs(shipped_plan("prod"), "EC2NodeClass")[POOL]["spec"]
    assert spec["tags"]["slurm-eks:pool"] == POOL and "slurm-eks:partition" not in spec["tags"]
    assert spec["placementGroupSelector"] == {"name": f"ml-training-prod-{POOL}"}


def test_a_trainium_pool_keeps_the_neuron_taint() -> None:
    pool = KubernetesPool(instance_types=["trn1.32xlarge"], max_nodes=2)
    assert pool_taints("trn", pool) == [{"key": POOL_LABEL, "value": "trn", "effect": "NoSchedule"},
                                        *node_taints(lookup("trn1.32xlarge"))]


def _placed(values: dict[Any, dict[str, Any]], labels: dict[str, str], taints: list[dict[str, str]]) -> set[str]:
    """The plugins that run on a node with these labels and taints."""
    placed = set()
    for chart, chart_values in values.items():
        own = chart_values["devicePlugin"] if chart == NEURON else chart_values
        selected = (_efa_admits(chart_values, labels) if chart == EFA else _affinity_admits(own["affinity"], labels))
        if selected and all(_tolerated(own["tolerations"], t) for t in taints):
            placed.add(chart.release)
    return placed


@pytest.mark.parametrize(("instance_type", "plugins"), [
    ("p5.48xlarge", {NVIDIA.release, EFA.release}), ("trn1.32xlarge", {NEURON.release, EFA.release})])
def test_device_plugins_reach_a_pools_nodes(instance_type: str, plugins: set[str]) -> None:
    config = _prod()
    pool = KubernetesPool(instance_types=[instance_type], max_nodes=1, efa=True)
    kind = pool_kind("k8s", pool)
    assert _placed(plugin_values(config.partitions, {"k8s": pool}), kind.labels, kind.taints) == plugins
    # Without the pools the plugins would not tolerate the pool's taint nor (EFA) select its label.
    assert _placed(plugin_values(config.partitions), kind.labels, kind.taints) == set()


def test_the_efa_plugin_selects_pools_by_their_own_label() -> None:
    config = _prod()
    efa = plugin_values(config.partitions, config.kubernetes_pools)[EFA]
    assert efa["supportedInstanceLabels"] == {"keys": [PARTITION_LABEL, POOL_LABEL],
                                              "values": ["gpu-a100", "gpu-h100", POOL, "trainium"]}


def test_the_network_check_covers_a_pools_nodes_without_slurm_ports() -> None:
    config = _prod()
    t = network.topology(shipped_plan("prod"))
    nodes = f"Karpenter nodes of {POOL}"
    table = {(f.who.name, f.whom.name, f.protocol, f.ports) for f in network.flows(t, config)
             if nodes in (f.who.name, f.whom.name)}
    cp, system = "the EKS control plane", "the system nodes"
    assert {(nodes, cp, "tcp", (443, 443)), (cp, nodes, "tcp", (10250, 10250)), (nodes, system, "udp", (53, 53)),
            (nodes, system, "tcp", (53, 53)), (nodes, nodes, "-1", (0, 65535)),
            (nodes, "FSx for Lustre", "tcp", (988, 988)), ("FSx for Lustre", nodes, "tcp", (1018, 1023))} <= table
    assert not {row for row in table if {6817, 6818} & set(range(row[3][0], row[3][1] + 1))
                and row[2] == "tcp" and row[0] != row[1]}


def test_the_prod_plugins_run_on_the_pools_nodes() -> None:
    plan = shipped_plan("prod")
    releases = {r.inputs.get("name"): r.inputs.get("values") for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    values = {chart: releases[chart.release] for chart in (NVIDIA, EFA, NEURON)}
    assert _placed(values, *_node(_docs(plan, "NodePool")[POOL])) == {NVIDIA.release, EFA.release}
