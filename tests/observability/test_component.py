"""`Observability` as Pulumi registers it (the offline plan's mocks; components/program.py does not call it
yet): dcgm-exporter only on the GPU partitions' nodes, neuron-monitor only on the Trainium partitions', one
labelled ConfigMap per dashboard, Grafana's admin Secret; and shown failing where the placement is wrong."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.catalog import lookup
from components.compute.nodepools import pool_labels, pool_taints
from components.compute.scheduling import node_labels, node_taints
from components.config.cluster import ClusterConfig
from components.config.stackfile import load_stack
from components.observability.dcgm import DCGM_EXPORTER, counters_csv
from components.observability.stack import (
    DCGM_JOB_MAP_DIR,
    GRAFANA_ADMIN_SECRET,
    Observability,
    ObservabilityArgs,
    dashboard_files,
)
from components.segmentation.segmented_namespaces import SegmentedNamespaces
from scripts.offline.mocks import RealisticMocks
from scripts.offline.plan import record
from scripts.offline.plan_model import Plan
from tests.slinky.helpers import RELEASE, config_of, trainium_only, variant

Nodes = list[tuple[str, dict[str, str], list[dict[str, str]]]]


def planned(config: ClusterConfig) -> Plan:
    def program() -> None:
        provider = k8s.Provider("k8s")
        prometheus = k8s.core.v1.ConfigMap("prometheus-stand-in", metadata={"name": "p", "namespace": "monitoring"},
                                           opts=pulumi.ResourceOptions(provider=provider))
        Observability("observability", ObservabilityArgs(config, SegmentedNamespaces(config, "10.0.0.0/16", provider),
                                                         prometheus))

    return record(program, "test", RealisticMocks(region=config.region, cluster_name="test"))


def _admits(affinity: dict[str, Any], labels: dict[str, str]) -> bool:
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return any(all((e["operator"] == "In" and labels.get(e["key"]) in e["values"])
                   or (e["operator"] == "Exists" and e["key"] in labels) for e in t["matchExpressions"])
               for t in terms)


def _tolerates(tolerations: list[dict[str, Any]], taints: list[dict[str, str]]) -> bool:
    return all(any(t["key"] == taint["key"] and t["effect"] == taint["effect"]
                   and (t["operator"] == "Exists" or t.get("value") == taint["value"]) for t in tolerations)
               for taint in taints)


def _nodes(config: ClusterConfig) -> Nodes:
    """(accelerator, labels, taints) of every partition's and pool's nodes."""
    found = [(it.accelerator, node_labels(name, it), node_taints(it)) for name, p in config.partitions.items()
             for it in map(lookup, p.instance_types)]
    return found + [(lookup(p.instance_types[0]).accelerator, pool_labels(name, p), pool_taints(name, p))
                    for name, p in config.kubernetes_pools.items()]


def _placement(affinity: dict[str, Any], tolerations: list[dict[str, Any]], nodes: Nodes) -> set[str]:
    """The accelerator kinds of the nodes a pod with this affinity and tolerations runs on, 'pool' for a pool's."""
    return {("pool" if "node.slurm-eks.io/pool" in labels else kind) for kind, labels, taints in nodes
            if _admits(affinity, labels) and _tolerates(tolerations, taints)}


def _releases(plan: Plan) -> dict[str, Any]:
    return {r.inputs["name"]: r for r in plan.of_type(RELEASE)}


def _manifests(plan: Plan, kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in plan.manifests() if d["kind"] == kind}


@pytest.fixture(scope="module")
def prod() -> tuple[ClusterConfig, Plan]:
    config = load_stack("prod")[0]
    return config, planned(config)


def test_dcgm_exporter_runs_on_gpu_partition_nodes_only_with_the_job_map(prod: tuple[ClusterConfig, Plan]) -> None:
    config, plan = prod
    dcgm = _releases(plan)["dcgm-exporter"]
    assert (dcgm.inputs["chart"], dcgm.inputs["version"], dcgm.inputs["namespace"]) == (
        "dcgm-exporter", DCGM_EXPORTER.version, "monitoring")
    assert dcgm.inputs["repositoryOpts"]["repo"] == "https://nvidia.github.io/dcgm-exporter/helm-charts"
    values = dcgm.inputs["values"]
    assert _placement(values["affinity"], values["tolerations"], _nodes(config)) == {"nvidia"}
    assert {"name": "DCGM_HPC_JOB_MAPPING_DIR", "value": DCGM_JOB_MAP_DIR} in values["extraEnv"]
    (volume,) = values["extraHostVolumes"]
    assert volume["hostPath"] == DCGM_JOB_MAP_DIR == "/var/run/slurm-eks/dcgm-job-map"
    assert {"name": volume["name"], "mountPath": DCGM_JOB_MAP_DIR, "readOnly": True} in values["extraVolumeMounts"]
    assert any(m["mountPath"] == "/etc/dcgm-exporter/default-counters.csv" for m in values["extraVolumeMounts"])
    assert values["serviceMonitor"]["enabled"] and values["customMetrics"] == counters_csv()
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter," in values["customMetrics"]


def test_neuron_monitor_runs_on_trainium_partition_nodes_only(prod: tuple[ClusterConfig, Plan]) -> None:
    config, plan = prod
    pod = _manifests(plan, "DaemonSet")["neuron-monitor"]["spec"]["template"]["spec"]
    assert _placement(pod["affinity"], pod["tolerations"], _nodes(config)) == {"neuron"}
    assert _manifests(plan, "ServiceMonitor")["neuron-monitor"]["spec"]["endpoints"] == [
        {"port": "metrics", "interval": "30s"}]
    assert _manifests(plan, "Service")["neuron-monitor"]["spec"]["ports"][0]["port"] == 8000


def test_a_dashboard_config_map_per_file_and_the_admin_secret(prod: tuple[ClusterConfig, Plan]) -> None:
    _, plan = prod
    maps = {n: d for n, d in _manifests(plan, "ConfigMap").items() if n.startswith("dashboard-")}
    assert {next(iter(d["data"])) for d in maps.values()} == set(dashboard_files())
    assert all(d["metadata"]["labels"] == {"grafana_dashboard": "1"} and d["metadata"]["namespace"] == "monitoring"
               for d in maps.values())
    secret = [r for r in plan.resources if r.is_manifest and r.inputs["kind"] == "Secret"]
    assert [r.inputs["metadata"]["name"] for r in secret] == [GRAFANA_ADMIN_SECRET]
    # Grafana's pod waits for the Secret and Pulumi waits for the release: the Secret must not wait for it.
    stand_in = next(r.urn for r in plan.resources if r.name == "prometheus-stand-in")
    assert stand_in not in secret[0].dependencies
    assert stand_in in _releases(plan)["dcgm-exporter"].dependencies


def test_dev_gets_dcgm_exporter_and_no_neuron_monitor() -> None:
    config = load_stack("dev")[0]
    plan = planned(config)
    assert set(_releases(plan)) == {"dcgm-exporter"}
    assert "neuron-monitor" not in _manifests(plan, "DaemonSet")
    values = _releases(plan)["dcgm-exporter"].inputs["values"]
    assert _placement(values["affinity"], values["tolerations"], _nodes(config)) == {"nvidia"}


def test_trainium_only_gets_no_dcgm_exporter() -> None:
    plan = planned(config_of(variant("prod", trainium_only)))
    assert _releases(plan) == {} and "neuron-monitor" in _manifests(plan, "DaemonSet")


def test_the_placement_check_fires_on_a_selector_that_takes_pools(prod: tuple[ClusterConfig, Plan]) -> None:
    config, plan = prod
    values = _releases(plan)["dcgm-exporter"].inputs["values"]
    loose = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]}}}
    everything = [{"key": t["key"], "operator": "Exists", "effect": "NoSchedule"}
                  for _, _, taints in _nodes(config) for t in taints]
    assert _placement(loose, everything, _nodes(config)) == {"nvidia", "pool"}
    assert _placement(values["affinity"], [], _nodes(config)) == set()  # untolerated taints keep it off
