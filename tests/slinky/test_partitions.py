"""One NodeSet per partition, on exactly its NodePool's nodes, filling each node, with GRES that Slurm can
schedule; and the prod stack the issue's "Done when" describes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components import catalog
from components.compute.scheduling import DEVICE_RESOURCES, EFA_RESOURCE
from components.config.base import duration_seconds
from components.config.cluster import ClusterConfig
from components.slinky.images import training_image
from components.slinky.specs import partitions_document
from scripts.offline.plan_model import Plan
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, objects, plan_of, releases, resource, trainium_only, variant

REPO = Path(__file__).resolve().parents[2]
STACKS = ["dev", "prod"]


def _config(stack: str) -> ClusterConfig:
    return config_of(raw_config(stack))


def test_prod_is_what_the_issue_asks_for() -> None:
    plan = shipped_plan("prod")
    counts = {k: len(objects(plan, k)) for k in ("Controller", "Accounting", "RestApi", "LoginSet", "NodeSet",
                                                 "ScaledObject")}
    assert counts == {"Controller": 1, "Accounting": 1, "RestApi": 1, "LoginSet": 1, "NodeSet": 3, "ScaledObject": 3}
    assert len(plan.of_type("aws:rds/instance:Instance")) == 1
    extra = {name: ns["spec"].get("extraConf", "") for name, ns in objects(plan, "NodeSet").items()}
    assert "Gres=gpu:8" in extra["gpu-h100"].split() and "Gres=gpu:8" in extra["gpu-a100"].split()
    assert "Gres" not in extra["trainium"]


def _tolerates(toleration: dict, taint: dict) -> bool:
    """Kubernetes' matching rule (core/v1 Toleration): same key, same effect or none, Exists or the same value."""
    return (toleration.get("key") in (None, taint["key"]) and toleration.get("effect") in (None, "", taint["effect"])
            and (toleration.get("operator") == "Exists" or toleration.get("value") == taint.get("value")))


@pytest.mark.parametrize("stack", STACKS)
def test_nodeset_lands_on_its_nodepool_and_fills_the_node(stack: str) -> None:
    plan, config = shipped_plan(stack), _config(stack)
    nodesets, pools = objects(plan, "NodeSet"), objects(plan, "NodePool")
    assert set(nodesets) == set(config.partitions)
    assert set(pools) == set(config.partitions) | set(config.kubernetes_pools)  # pools: tests/karpenter/test_pools.py
    for name, partition in config.partitions.items():
        template, pool = nodesets[name]["spec"]["template"]["spec"], pools[name]["spec"]["template"]
        assert template["nodeSelector"] == pool["metadata"]["labels"]
        for taint in pool["spec"].get("taints", []):
            assert any(_tolerates(t, taint) for t in template["tolerations"]), (name, taint)
        types = [catalog.lookup(t) for t in partition.instance_types]
        want = {DEVICE_RESOURCES[types[0].accelerator]: str(types[0].accelerators)}
        if partition.efa:
            want[EFA_RESOURCE] = str(min(t.efa_interfaces for t in types))
        resources = nodesets[name]["spec"]["slurmd"]["resources"]
        for amounts in resources.values():  # requests and limits: the pod's CPU and memory, then its devices
            assert amounts.keys() - {"cpu", "memory"} == want.keys()
            assert {k: amounts[k] for k in want} == want
        assert nodesets[name]["spec"]["replicas"] == partition.min_nodes


def test_prod_device_requests_match_the_hardware() -> None:
    nodesets = objects(shipped_plan("prod"), "NodeSet")
    requests = {name: {k: v for k, v in ns["spec"]["slurmd"]["resources"]["requests"].items()
                       if k not in ("cpu", "memory")} for name, ns in nodesets.items()}
    assert requests == {
        "gpu-h100": {"nvidia.com/gpu": "8", EFA_RESOURCE: "32"},
        "gpu-a100": {"nvidia.com/gpu": "8", EFA_RESOURCE: "4"},
        "trainium": {"aws.amazon.com/neuron": "16", EFA_RESOURCE: "8"},  # trn1 has 8, trn1n 16: 8 fit both
    }


@pytest.mark.parametrize("stack", STACKS)
def test_shared_filesystem_and_shm_through_the_pod_template(stack: str) -> None:
    for ns in objects(shipped_plan(stack), "NodeSet").values():
        volumes = {v["name"]: v for v in ns["spec"]["template"]["spec"]["volumes"]}
        mounts = {m["mountPath"]: m["name"] for m in ns["spec"]["slurmd"]["volumeMounts"]}
        assert volumes[mounts["/shared"]]["persistentVolumeClaim"] == {"claimName": "fsx-shared"}
        assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory"}
        assert "volumes" not in ns["spec"]  # Slinky ignores volumes anywhere but the pod template
    (login,) = objects(shipped_plan(stack), "LoginSet").values()
    volumes = {v["name"]: v for v in login["spec"]["template"]["spec"]["volumes"]}
    (shared,) = [m for m in login["spec"]["login"]["volumeMounts"] if m["mountPath"] == "/shared"]
    assert volumes[shared["name"]]["persistentVolumeClaim"] == {"claimName": "fsx-shared"}


def test_partition_lines_carry_max_time_and_one_default() -> None:
    nodesets = objects(shipped_plan("prod"), "NodeSet")
    configs = {name: ns["spec"]["partition"] for name, ns in nodesets.items()}
    assert all(c["enabled"] is True and "MaxTime=7-00:00:00" in c["config"].split() for c in configs.values())
    assert [n for n, c in configs.items() if "Default=YES" in c["config"].split()] == ["gpu-h100"]
    # The operator passes extraConf to slurmd --conf split on spaces: every item must be key=value.
    for ns in nodesets.values():
        assert all(item.count("=") == 1 for item in ns["spec"]["extraConf"].split())


def _gres(plan: Plan) -> tuple[str, dict[str, str] | None, list[str]]:
    (controller,) = objects(plan, "Controller").values()
    refs = [r["name"] for r in controller["spec"]["configFileRefs"]]
    gres = [cm for name, cm in objects(plan, "ConfigMap").items() if name in refs and "gres.conf" in cm["data"]]
    return controller["spec"].get("extraConf", ""), gres[0]["data"] if gres else None, \
        [ns["spec"].get("extraConf", "") for ns in objects(plan, "NodeSet").values()]


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_stacks_have_all_three_gres_pieces(stack: str) -> None:
    controller_conf, gres_conf, nodeset_confs = _gres(shipped_plan(stack))
    assert "GresTypes=gpu" in controller_conf.splitlines()
    assert gres_conf == {"gres.conf": "AutoDetect=nvidia\n"}
    assert any(c.startswith("Gres=gpu:") for conf in nodeset_confs for c in conf.split())


def test_trainium_only_stack_has_no_gres(tmp_path: Path) -> None:
    controller_conf, gres_conf, nodeset_confs = _gres(plan_of(variant("prod", trainium_only), tmp_path))
    assert "GresTypes" not in controller_conf and gres_conf is None
    assert nodeset_confs == ["Features=trainium,efa"]


@pytest.mark.parametrize("stack", STACKS)
def test_each_nodeset_is_autoscaled_on_its_own_queue(stack: str) -> None:
    plan, config = shipped_plan(stack), _config(stack)
    scaled = objects(plan, "ScaledObject")
    assert set(scaled) == set(config.partitions)
    keda = releases(plan)["keda"]
    for name, partition in config.partitions.items():
        spec = scaled[name]["spec"]
        assert spec["scaleTargetRef"] == {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "name": name}
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (partition.min_nodes, partition.max_nodes)
        assert spec["cooldownPeriod"] == duration_seconds(partition.idle_timeout)
        (trigger,) = spec["triggers"]
        assert f'slurm_partition_jobs_pending{{partition="{name}"}}' in trigger["metadata"]["query"]
        assert trigger["metricType"] == "AverageValue" and trigger["metadata"]["threshold"] == "1"
        dependencies = set(resource(plan, "ScaledObject", name).dependencies)
        assert {keda.urn, resource(plan, "NodeSet", name).urn} <= dependencies
    (controller,) = objects(plan, "Controller").values()
    assert controller["spec"]["metrics"]["enabled"] is True  # makes slurmctld serve the metrics
    assert "/metrics/partitions" in [e["path"] for e in controller["spec"]["metrics"]["serviceMonitor"]["endpoints"]]
    values = releases(plan)["prometheus"].inputs["values"]
    # Without these Prometheus selects only its own release's monitors, never Slinky's: no metrics, no scaling.
    prometheus = values["prometheus"]["prometheusSpec"]
    assert prometheus["serviceMonitorSelectorNilUsesHelmValues"] is False
    assert prometheus["podMonitorSelectorNilUsesHelmValues"] is False
    # Grafana never with its chart's default admin password (components/observability/stack.py's Secret instead);
    # no Alertmanager without a receiver.
    assert values["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    assert values["alertmanager"] == {"enabled": False}


def test_keda_polls_as_often_as_docs_operating_md_says() -> None:
    (seconds,) = re.findall(r"Every (\d+) s KEDA sets each partition's", (REPO / "docs/operating.md").read_text())
    assert {s["spec"]["pollingInterval"] for s in objects(shipped_plan("prod"), "ScaledObject").values()} == {
        int(seconds)}


def test_partitions_document_tells_the_job_tooling_each_prod_partition() -> None:
    config = _config("prod")
    document = partitions_document(config)
    images = {name: training_image(p) for name, p in config.partitions.items()}
    assert document == {
        "gpu-h100": {"image": images["gpu-h100"], "accelerator": "nvidia", "acceleratorsPerNode": 8,
                     "efaInterfaces": 32, "maxNodes": 8, "maxTime": "7-00:00:00", "default": True},
        "gpu-a100": {"image": images["gpu-a100"], "accelerator": "nvidia", "acceleratorsPerNode": 8,
                     "efaInterfaces": 4, "maxNodes": 16, "maxTime": "7-00:00:00", "default": False},
        "trainium": {"image": images["trainium"], "accelerator": "neuron", "acceleratorsPerNode": 16,
                     "efaInterfaces": 8, "maxNodes": 32, "maxTime": "7-00:00:00", "default": False},
    }


@pytest.mark.parametrize("stack", STACKS)
def test_nodesets_are_replaced_only_between_jobs(stack: str) -> None:
    for name, ns in objects(shipped_plan(stack), "NodeSet").items():
        assert ns["spec"]["updateStrategy"] == {"type": "OnDelete"}, name
        assert ns["spec"]["workloadDisruptionProtection"] is True, name


@pytest.mark.parametrize("stack", STACKS)
def test_controller_state_persists_and_its_metrics_are_scraped(stack: str) -> None:
    (controller,) = objects(shipped_plan(stack), "Controller").values()
    spec = controller["spec"]
    storage_class = spec["persistence"]["storageClassName"]
    assert storage_class in objects(shipped_plan(stack), "StorageClass")
    assert spec["persistence"] == {"enabled": True, "storageClassName": storage_class,
                                   "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Gi"}}}
    assert spec["metrics"] == {"enabled": True, "serviceMonitor": {"enabled": True, "interval": "30s", "endpoints": [
        {"path": "/metrics/partitions"}, {"path": "/metrics/nodes"}, {"path": "/metrics/jobs"},
        {"path": "/metrics/scheduler"}]}}
