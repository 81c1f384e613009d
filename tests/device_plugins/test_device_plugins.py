"""Device plugins in the plan: installed only for hardware some partition has, and scheduled exactly onto
the nodes (labels and taints from components.compute.scheduling) that have it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.catalog import lookup
from components.compute.device_plugins import EFA, NEURON, NVIDIA, plugin_values
from components.compute.scheduling import PARTITION_LABEL, node_labels, node_taints
from components.config import cluster as cfg
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import trainium_only

RELEASE = "kubernetes:helm.sh/v3:Release"
PLUGINS = {NVIDIA.release, EFA.release, NEURON.release}


def _plugins(plan: Plan) -> dict[str, dict[str, Any]]:
    return {r.inputs["name"]: r.inputs for r in plan.of_type(RELEASE) if r.inputs["name"] in PLUGINS}


def _trainium_only(tmp_path: Path) -> Plan:
    raw = raw_config("prod")
    trainium_only(raw)
    (tmp_path / "Pulumi.trn.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    plan, _ = run_plan("trn", tmp_path)
    return plan


# Kubernetes scheduling semantics, enough for what the charts get: required node affinity with `In` and
# tolerations with `Equal`/`Exists`.
def _affinity_admits(affinity: dict[str, Any], labels: dict[str, str]) -> bool:
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return any(all(e["operator"] == "In" and labels.get(e["key"]) in e["values"] for e in t["matchExpressions"])
               for t in terms)


def _efa_admits(values: dict[str, Any], labels: dict[str, str]) -> bool:
    # The chart renders one `In` term per key over the shared list of values.
    selection = values["supportedInstanceLabels"]
    return any(labels.get(key) in selection["values"] for key in selection["keys"])


def _tolerated(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    return any(t["key"] == taint["key"] and t["effect"] == taint["effect"]
               and (t["operator"] == "Exists" or t.get("value") == taint["value"]) for t in tolerations)


def _nodes(raw: dict[str, Any]) -> Iterator[tuple[cfg.Partition, Any, dict[str, str], list[dict[str, str]]]]:
    """Every kind of node the stack's partitions bring up: (partition, instance type, labels, taints)."""
    for name, spec in raw["partitions"].items():
        partition = cfg.Partition.model_validate(spec)
        for it in map(lookup, partition.instance_types):
            yield partition, it, node_labels(name, it), node_taints(it)


def _check_placement(plan: Plan, raw: dict[str, Any]) -> None:
    plugins = _plugins(plan)
    for partition, it, labels, taints in _nodes(raw):
        placed = {
            NVIDIA.release: NVIDIA.release in plugins
            and _affinity_admits(plugins[NVIDIA.release]["values"]["affinity"], labels),
            NEURON.release: NEURON.release in plugins
            and _affinity_admits(plugins[NEURON.release]["values"]["devicePlugin"]["affinity"], labels),
            EFA.release: EFA.release in plugins and _efa_admits(plugins[EFA.release]["values"], labels),
        }
        assert placed == {NVIDIA.release: it.accelerator == "nvidia", NEURON.release: it.accelerator == "neuron",
                          EFA.release: partition.efa}, (it.name, labels)
        for release, on_node in placed.items():
            if on_node:
                values = plugins[release]["values"]
                tolerations = (values["devicePlugin"] if release == NEURON.release else values)["tolerations"]
                assert all(_tolerated(tolerations, t) for t in taints), (release, it.name)


def test_prod_installs_all_three_pinned_plugins() -> None:
    plugins = _plugins(shipped_plan("prod"))
    assert set(plugins) == PLUGINS
    for chart in (NVIDIA, EFA, NEURON):
        release = plugins[chart.release]
        assert release["chart"] == chart.chart and release["version"] == chart.version
        assert release["namespace"] == "kube-system"
        assert release.get("repositoryOpts") == ({"repo": chart.repo} if chart.repo else None)
    assert plugins[NEURON.release]["chart"] == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    neuron = plugins[NEURON.release]["values"]
    assert neuron["scheduler"] == {"enabled": False} and neuron["npd"] == {"enabled": False}


def test_dev_installs_the_nvidia_plugin_only() -> None:
    assert set(_plugins(shipped_plan("dev"))) == {NVIDIA.release}


def test_trainium_only_stack_gets_neuron_and_efa_but_no_nvidia(tmp_path: Path) -> None:
    plan = _trainium_only(tmp_path)
    assert set(_plugins(plan)) == {NEURON.release, EFA.release}
    assert _plugins(plan)[EFA.release]["values"]["supportedInstanceLabels"] == {
        "keys": [PARTITION_LABEL], "values": ["trainium"]}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_plugin_runs_exactly_on_the_nodes_with_its_hardware(stack: str) -> None:
    _check_placement(shipped_plan(stack), raw_config(stack))


def test_placement_holds_for_a_trainium_only_stack(tmp_path: Path) -> None:
    raw = raw_config("prod")
    trainium_only(raw)
    _check_placement(_trainium_only(tmp_path), raw)


def test_efa_plugin_tolerates_both_accelerator_taints() -> None:
    tolerations = _plugins(shipped_plan("prod"))[EFA.release]["values"]["tolerations"]
    for kind in ("p5.48xlarge", "trn1.32xlarge"):
        (taint,) = node_taints(lookup(kind))
        assert _tolerated(tolerations, taint)


def test_a_partition_without_efa_gets_no_efa_plugin() -> None:
    gpu = cfg.Partition(instance_types=["p5.48xlarge"], max_nodes=2, efa=False)
    assert set(plugin_values({"gpu": gpu})) == {NVIDIA}
    assert set(plugin_values({"gpu": gpu.model_copy(update={"efa": True})})) == {NVIDIA, EFA}
