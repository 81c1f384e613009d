"""The lifecycle controller's topology step through the official kubernetes client (slurm/agent/kube.py) against
a local HTTP server playing the Kubernetes API (tests/health/kube_api.py) and an EC2 that answers
DescribeInstanceTopology from the recorded pages, holding back the instances a call did not ask for (as EC2
does)."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from collections.abc import Iterator

import pytest
import yaml

from slurm.topology.instance_topology import NAMESPACE
from slurm.topology.sync import ANNOTATION, TopologySettings, describe_topology, topology_pass
from tests.health.kube_api import MERGE_PATCH, ApiServer, node, pod
from tests.topology import recorded

SETTINGS = TopologySettings("ec2", "slurm", "app.kubernetes.io/name=slurmd", "slurm-eks-topology")
NS = f"{{{NAMESPACE}}}"


class RecordedEc2:
    """Page 1 first, page 2 for page 1's nextToken, each limited to the requested InstanceId.N."""

    def __init__(self) -> None:
        self.pages = recorded.roots()
        self.calls: list[dict[str, str]] = []

    def __call__(self, action: str, params: dict[str, str]) -> ET.Element:
        assert action == "DescribeInstanceTopology" and "MaxResults" not in params
        self.calls.append(params)
        wanted = {v for k, v in params.items() if k.startswith("InstanceId.")}
        first_token = self.pages[0].findtext(f"{NS}nextToken")
        page = copy.deepcopy(self.pages[1] if params.get("NextToken") == first_token else self.pages[0])
        items = page.find(f"{NS}instanceSet")
        for item in list(items):
            if item.findtext(f"{NS}instanceId") not in wanted:
                items.remove(item)
        return page


@pytest.fixture
def cluster() -> Iterator[ApiServer]:
    fake = ApiServer()
    for k in range(1, 10):  # instance k runs slurmd pod gpu-h100-<k-1>
        fake.nodes[f"ip-10-0-0-{k}"] = node(f"ip-10-0-0-{k}", recorded.instance_id(k))
        fake.pods[f"gpu-h100-{k - 1}"] = pod(f"gpu-h100-{k - 1}", f"ip-10-0-0-{k}")
    fake.pods["gpu-h100-9"] = pod("gpu-h100-9", None)  # pending: no node, no topology
    fake.configmaps[("slurm", "slurm-eks-topology")] = {
        "apiVersion": "v1", "kind": "ConfigMap", "data": {"topology.yaml": "---\n"},
        "metadata": {"name": "slurm-eks-topology", "namespace": "slurm", "resourceVersion": "5"}}
    yield fake
    fake.close()


def test_writes_the_tree_and_annotates_each_node(cluster: ApiServer) -> None:
    events: list[dict] = []
    ec2 = RecordedEc2()
    text = topology_pass(cluster.client(), ec2, SETTINGS, events.append)
    (topology,) = yaml.safe_load(cluster.configmaps[("slurm", "slurm-eks-topology")]["data"]["topology.yaml"])
    assert yaml.safe_load(text) == [topology] and topology["cluster_default"] is True
    switches = {s["switch"]: s for s in topology["tree"]["switches"]}
    assert switches[recorded.LEAF_135]["nodes"] == "gpu-h100-0,gpu-h100-2,gpu-h100-4"
    assert switches["unplaced"]["nodes"] == "gpu-h100-8"  # the m5 instance EC2 has no topology for
    specs = {name: n["metadata"]["annotations"][ANNOTATION] for name, n in cluster.nodes.items()}
    assert specs["ip-10-0-0-1"] == f"ec2:{recorded.LEAF_135}" and specs["ip-10-0-0-9"] == "ec2:unplaced"
    assert cluster.nodes["ip-10-0-0-1"]["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] == "0"
    assert [c.get("NextToken") is not None for c in ec2.calls] == [False, True]  # both pages read
    assert sum(e["event"] == "topology-annotated" for e in events) == 9
    (listed,) = [r for r in cluster.requests if r.path == "/api/v1/namespaces/slurm/pods"]
    assert listed.method == "GET" and listed.query == {"labelSelector": ["app.kubernetes.io/name=slurmd"]}
    patches = [r for r in cluster.requests if r.method == "PATCH"]
    assert {r.path for r in patches} == {f"/api/v1/nodes/ip-10-0-0-{k}" for k in range(1, 10)}
    assert {r.content_type for r in patches} == {MERGE_PATCH}  # RFC 7386, not strategic merge nor JSON patch
    assert [(r.method, r.path) for r in cluster.requests if r.method == "PUT"] == [
        ("PUT", "/api/v1/namespaces/slurm/configmaps/slurm-eks-topology")]


def test_a_second_pass_with_nothing_new_writes_nothing(cluster: ApiServer) -> None:
    kube = cluster.client()
    topology_pass(kube, RecordedEc2(), SETTINGS, lambda e: None)
    cluster.requests.clear()
    topology_pass(kube, RecordedEc2(), SETTINGS, lambda e: None)
    assert [r.method for r in cluster.requests if r.method != "GET"] == []


def test_before_any_slurmd_pod_runs_the_topology_is_flat() -> None:
    fake = ApiServer()
    try:
        fake.configmaps[("slurm", "slurm-eks-topology")] = {
            "apiVersion": "v1", "kind": "ConfigMap", "data": {},
            "metadata": {"name": "slurm-eks-topology", "namespace": "slurm", "resourceVersion": "5"}}
        text = topology_pass(fake.client(), RecordedEc2(), SETTINGS, lambda e: None)
        assert yaml.safe_load(text) == [{"topology": "ec2", "cluster_default": True, "flat": True}]
    finally:
        fake.close()


def test_more_than_100_instances_take_several_calls() -> None:
    calls: list[dict[str, str]] = []

    def empty(action: str, params: dict[str, str]) -> ET.Element:
        calls.append(params)
        return ET.fromstring(f'<DescribeInstanceTopologyResponse xmlns="{NAMESPACE}"><instanceSet/>'
                             "</DescribeInstanceTopologyResponse>")

    describe_topology(empty, [f"i-{k:017x}" for k in range(250)])
    assert [len([k for k in c if k.startswith("InstanceId.")]) for c in calls] == [100, 100, 50]


def test_ec2_is_asked_only_about_instances_it_has_not_placed(cluster: ApiServer) -> None:
    kube, known = cluster.client(), {}
    first = RecordedEc2()
    topology_pass(kube, first, SETTINGS, lambda e: None, known)
    assert len(known) == 8  # the uncovered m5 instance has no place: asked again next time
    again = RecordedEc2()
    topology_pass(kube, again, SETTINGS, lambda e: None, known)
    asked = [v for call in again.calls for k, v in call.items() if k.startswith("InstanceId.")]
    assert set(asked) == {recorded.UNCOVERED}  # (the recorded pages page through it, as listed)
