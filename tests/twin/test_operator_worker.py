"""NodeSet pods as slurm-operator v1.2.1 builds them: the Go tests' cases (internal/builder/workerbuilder/
worker_app_test.go, internal/builder/common/common_test.go GetContainer/PodResourceLimits,
internal/controller/nodeset/utils/utils_test.go), Kubernetes quantity semantics, and the shipped plans."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.twin.operator import consts, names, worker
from scripts.twin.operator.common import container_resource_limits, pod_resource_limits
from scripts.twin.operator.etcfiles import EtcFile, worker_etc_files
from scripts.twin.operator.labels import worker_selector_labels
from scripts.twin.operator.quantity import parse_quantity, quantity_value
from scripts.twin.operator.services import worker_service
from tests.twin.operator_plan import slinky

CONTROLLER = {"kind": "Controller", "metadata": {"name": "slurm", "namespace": "slurm"},
              "spec": {"slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"}}}


def nodeset(name: str = "slurm-foo", **spec: Any) -> dict[str, Any]:
    return {"kind": "NodeSet", "metadata": {"name": name, "namespace": "slurm"},
            "spec": {"controllerRef": {"name": "slurm"}, **spec}}


# --- k8s apimachinery resource.Quantity: ParseQuantity and Value() ---------------------------------------------


@pytest.mark.parametrize(("text", "value"), [
    ("190", 190), ("1", 1), ("500m", 1), ("100m", 1), ("1500m", 2), ("1.5", 2), ("0", 0), ("0.1n", 1),
    ("1Gi", 2**30), ("2Gi", 2 * 2**30), ("1892Gi", 1892 * 2**30), ("1k", 1000), ("1M", 10**6), ("1e3", 1000),
    ("1E3", 1000), ("12Mi", 12 * 2**20), ("+4", 4), ("0.5Ki", 512), (190, 190),
])
def test_quantity_value_rounds_up(text: str | int, value: int) -> None:
    assert quantity_value(text) == value


@pytest.mark.parametrize("text", ["", "1Z", "1 Gi", "abc", "1Gib", "1e"])
def test_quantity_rejects_what_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


# --- common_test.go TestCommonBuilder_Get{Container,Pod}ResourceLimits ----------------------------------------


def test_container_and_pod_resource_limits() -> None:
    assert container_resource_limits({}) == (0, 0)
    assert container_resource_limits({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}) == (1, 1073741824)
    assert pod_resource_limits({}) == (0, 0)
    assert pod_resource_limits({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}) == (1, 1073741824)


# --- worker_app_test.go TestWorkerBuilder_getResourceLimits ----------------------------------------------------


def with_limits(pod: dict[str, str] | None = None, container: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if pod is not None:
        spec["template"] = {"spec": {"resources": {"limits": pod}}}
    if container is not None:
        spec["slurmd"] = {"resources": {"limits": container}}
    return nodeset(**spec)


@pytest.mark.parametrize(("ns", "want"), [
    (nodeset(), (0, 0)),
    (with_limits(pod={"cpu": "1"}), (1, 0)),
    (with_limits(pod={"memory": "1Gi"}), (0, 1024)),
    (with_limits(pod={"cpu": "1", "memory": "1Gi"}), (1, 1024)),
    (with_limits(container={"cpu": "4"}), (4, 0)),
    (with_limits(container={"memory": "2Gi"}), (0, 2048)),
    (with_limits(container={"cpu": "4", "memory": "2Gi"}), (4, 2048)),
    (with_limits(pod={"cpu": "4", "memory": "2Gi"}, container={"cpu": "1", "memory": "1Gi"}), (1, 1024)),
    (with_limits(container={"cpu": "500m", "memory": "1500Ki"}), (1, 1)),  # cpu rounds up, MiB truncates
])
def test_resource_limits(ns: dict[str, Any], want: tuple[int, int]) -> None:
    assert worker.resource_limits(ns) == want


# --- slurmdConfArgs and slurmdArgs -----------------------------------------------------------------------------


def test_slurmd_args_of_the_go_test_nodeset() -> None:
    ns = nodeset(extraConf="features=bar weight=5", template={"spec": {"hostname": "foo-"}})
    assert worker.slurmd_args(ns, CONTROLLER) == [
        "-Z", "--conf-server", "slurm-controller.slurm:6817", "--conf", "'Features=foo,bar Weight=5'"]


@pytest.mark.parametrize(("extra", "want"), [
    ("", "'Features=slurm-foo'"),
    ("Feature=a Features=b", "'Features=slurm-foo,a,b'"),
    ("RealMemory=1000 gres=gpu:8", "'Features=slurm-foo Gres=gpu:8 Realmemory=1000'"),
    ("Weight=1 weight=2", "'Features=slurm-foo Weight=1,2'"),
    ("CPUs=4", "'Cpus=4 Features=slurm-foo'"),
])
def test_slurmd_conf_args(extra: str, want: str) -> None:
    assert worker.slurmd_conf_args(nodeset(extraConf=extra)) == ["--conf", want]


@pytest.mark.parametrize("extra", ["Gres=gpu:8  Weight=1", "Gres=gpu:8 ", "novalue"])
def test_slurmd_conf_args_panics_on_malformed_items(extra: str) -> None:
    with pytest.raises(ValueError, match="malformed --conf item"):
        worker.slurmd_conf_args(nodeset(extraConf=extra))


@pytest.mark.parametrize(("key", "want"), [
    ("gres", "Gres"), ("RealMemory", "Realmemory"), ("features", "Features"), ("cpu_spec_list", "Cpu_spec_list"),
    ("a-b", "A-B"), ("a.b", "A.b"), ("a..b", "A..B"), ("9lives", "9Lives"), ("", ""),
])
def test_go_title(key: str, want: str) -> None:
    assert worker.go_title(key) == want


def test_external_controller_conf_server() -> None:
    ctl = {**CONTROLLER, "spec": {"external": True, "externalConfig": {"host": "ctld.example", "port": 7000}}}
    assert names.configless_args(ctl) == ["--conf-server", "ctld.example:7000"]


# --- worker_app_test.go TestBuilder_BuildWorkerPodTemplate -----------------------------------------------------


def test_worker_pod_template_of_the_go_test() -> None:
    ns = nodeset(extraConf="features=bar weight=5", template={"spec": {"hostname": "foo-"}})
    template = worker.worker_pod_template(ns, CONTROLLER)
    assert worker_selector_labels(ns).items() <= template["metadata"]["labels"].items()
    spec = template["spec"]
    slurmd = spec["containers"][0]
    assert slurmd["name"] == "slurmd"
    assert slurmd["ports"][0] == {"name": "slurmd", "containerPort": 6818, "protocol": "TCP"}
    assert spec["subdomain"] == "slurm-workers-slurm"
    assert spec["dnsConfig"]["searches"] == ["slurm-workers-slurm.slurm.svc.cluster.local"]
    assert spec["tolerations"] == [{"key": "nodeset.slinky.slurm.net/worker", "operator": "Equal",
                                    "effect": "NoExecute"}]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False


# --- utils_test.go: pod names, Slurm node names, DaemonSet hostnames ------------------------------------------


@pytest.mark.parametrize(("name", "ordinal", "padding", "want"), [
    ("foo", 0, 0, "foo-0"), ("bar", 1, 0, "bar-1"), ("gpu", 7, 3, "gpu-007")])
def test_ordinal_pod_name(name: str, ordinal: int, padding: int, want: str) -> None:
    ns = nodeset(name, ordinalPadding=padding) if padding else nodeset(name)
    assert names.nodeset_pod_name(ns, ordinal) == want
    pod = worker.nodeset_pod(ns, CONTROLLER, ordinal)
    assert (pod.name, pod.hostname) == (want, want)
    assert pod.labels[consts.LABEL_NODESET_POD_HOSTNAME] == want  # GetSlurmNodeName


def test_template_hostname_prefixes_the_ordinal() -> None:
    pod = worker.nodeset_pod(nodeset("slurm-foo", template={"spec": {"hostname": "foo-"}}, ordinalPadding=2),
                             CONTROLLER, 3)
    assert (pod.name, pod.hostname) == ("slurm-foo-03", "foo-03")
    assert pod.labels[consts.LABEL_NODESET_POD_INDEX] == "03"
    assert pod.labels[consts.LABEL_NODESET_POD_NAME] == "slurm-foo-03"
    assert pod.labels[consts.LABEL_NODESET_SCALING_MODE] == "StatefulSet"


@pytest.mark.parametrize(("node", "override", "want"), [
    ("node-1", "", "node-1"), ("node-1-", "", "node-1-"), ("", "", ""), ("a", "", "a"),
    ("node1.us-west-2.compute.internal", "", "node1"),
    ("node-2.my-project.us-central1-a.c.gcp-project.internal", "", "node-2"),
    ("node-0.abc123.region.azure.internal-", "", "node-0"),
    ("node-1.example.com", "custom-hostname", "custom-hostname"),
])
def test_daemonset_pod_hostname(node: str, override: str, want: str) -> None:
    assert names.daemonset_pod_hostname(node, override) == want


def test_daemonset_mode_pod() -> None:
    pod = worker.nodeset_pod(nodeset(scalingMode="DaemonSet"), CONTROLLER, node_name="ip-10-0-0-1.ec2.internal")
    assert (pod.name, pod.generate_name, pod.hostname) == ("", "slurm-foo-", "ip-10-0-0-1")
    assert consts.LABEL_NODESET_POD_INDEX not in pod.labels
    with pytest.raises(ValueError, match="node_name"):
        worker.nodeset_pod(nodeset(scalingMode="DaemonSet"), CONTROLLER)


def test_volume_claim_templates_become_ordinal_claims() -> None:
    ns = nodeset(volumeClaimTemplates=[{"metadata": {"name": "scratch"}, "spec": {}}],
                 template={"spec": {"volumes": [{"name": "home", "hostPath": {"path": "/tmp/home"}}]}})
    pod = worker.nodeset_pod(ns, CONTROLLER, 2)
    assert pod.volumes[0].name == "scratch"
    assert pod.volumes[0].source == {"persistentVolumeClaim": {"claimName": "scratch-slurm-foo-2"}}
    assert [v.name for v in pod.volumes[1:]] == ["home", "slurm-etc", "slurm-logfile"]


def test_oversubscribe_drops_the_anti_affinity() -> None:
    assert "affinity" not in worker.nodeset_pod(nodeset(oversubscribeNode=True), CONTROLLER).spec
    anti = worker.nodeset_pod(nodeset(), CONTROLLER).spec["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == [{
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "In",
                                                "values": ["slurmd"]}]}}]


def test_ssh_enabled_adds_port_mounts_and_volumes() -> None:
    ns = nodeset(ssh={"enabled": True, "sssdConfRef": {"name": "sssd", "key": "sssd.conf"}})
    pod = worker.nodeset_pod(ns, CONTROLLER)
    slurmd = pod.container("slurmd")
    assert [(p.name, p.container_port) for p in slurmd.ports] == [("slurmd", 6818), ("ssh", 22)]
    assert {m.mount_path for m in slurmd.volume_mounts} >= {"/etc/ssh/sshd_config", "/etc/sssd/sssd.conf"}
    assert pod.volume("ssh-config").source["projected"]["sources"][0]["configMap"]["name"] == "slurm-foo-ssh-config"


# --- the shipped plans ----------------------------------------------------------------------------------------


def test_prod_gpu_h100_slurmd() -> None:
    s = slinky("prod")
    pod = worker.nodeset_pod(s.nodeset("gpu-h100"), s.controller, 0)
    slurmd = pod.container("slurmd")
    assert slurmd.args == ("-Z", "--conf-server", "slurm-controller.slurm:6817", "--conf",
                           "'Features=gpu-h100,h100,efa Gres=gpu:8'")
    assert slurmd.env_value("POD_CPUS") == "190"
    assert slurmd.env_value("POD_MEMORY") == str(1892 * 1024)
    topology = next(e for e in slurmd.env if e.name == "POD_TOPOLOGY")
    assert topology.value_from == {"fieldRef": {"fieldPath": "metadata.annotations['topology.slinky.slurm.net/spec']"}}
    assert slurmd.pre_stop == ("/usr/bin/sh", "-c", "scontrol update nodename=$(hostname) state=down "
                               "reason='slurm-operator: Pod is terminating';")
    assert slurmd.image == s.nodeset("gpu-h100")["spec"]["slurmd"]["image"]
    assert slurmd.resources == s.nodeset("gpu-h100")["spec"]["slurmd"]["resources"]
    assert (pod.name, pod.hostname, pod.subdomain) == ("gpu-h100-0", "gpu-h100-0", "slurm-workers-slurm")
    assert pod.dns_searches == ("slurm-workers-slurm.slurm.svc.cluster.local",)
    assert pod.labels["app.kubernetes.io/name"] == "slurmd"
    assert pod.labels["slinky.slurm.net/cluster"] == "slurm"
    assert pod.node_selector["node.slurm-eks.io/partition"] == "gpu-h100"
    # The template's tolerations replace the operator's (tolerations has no patch strategy: replaced whole).
    assert pod.tolerations == tuple(s.nodeset("gpu-h100")["spec"]["template"]["spec"]["tolerations"])
    mounts = [m.mount_path for m in slurmd.volume_mounts]
    user = [m["mountPath"] for m in s.nodeset("gpu-h100")["spec"]["slurmd"]["volumeMounts"]]
    assert mounts == [*user, "/etc/slurm", "/var/log/slurm"]  # the user's new items first
    assert [c.name for c in pod.init_containers] == ["logfile", "identity"]
    assert pod.container("logfile").restart_policy == "Always"
    assert pod.container("logfile").env_value("SOCKET") == "/var/log/slurm/slurmd.log"


def test_stack_nodesets() -> None:
    for stack in ("prod", "dev"):
        s = slinky(stack)
        for ns in s.nodesets:
            pod = worker.nodeset_pod(ns, s.controller, 1)
            limits = ns["spec"]["slurmd"]["resources"]["limits"]
            slurmd = pod.container("slurmd")
            assert slurmd.env_value("POD_CPUS") == str(quantity_value(limits["cpu"]))
            assert slurmd.env_value("POD_MEMORY") == str(quantity_value(limits["memory"]) // 2**20)
            assert worker_etc_files(ns, s.controller) == {
                "slurm.key": EtcFile("Secret", "slurm-auth-slurm", "slurm.key", 0o600)}
            assert worker_service(ns).selector.items() <= pod.labels.items()


def test_worker_service() -> None:
    svc = worker_service(nodeset())
    assert (svc.name, svc.headless, svc.spec["publishNotReadyAddresses"]) == ("slurm-workers-slurm", True, True)
    assert svc.selector == {"app.kubernetes.io/name": "slurmd", "slinky.slurm.net/cluster": "slurm"}
    assert [(p.name, p.port, p.target_port) for p in svc.ports] == [("slurmd", 6818, "slurmd")]
