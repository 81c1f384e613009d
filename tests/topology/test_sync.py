"""The lifecycle controller's topology step against ApiServer (a local HTTP server playing the Kubernetes API,
tests/health/kube_api.py, through slurm/agent/kube.py) and the agents' EC2 client answered by
botocore's Stubber from the recorded pages, each
holding back the instances a call did not ask for (as EC2 does)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import yaml
from botocore.stub import Stubber

from slurm.agent.topology.instance_topology import OPERATION
from slurm.agent.topology.sync import ANNOTATION, TopologySettings, topology_pass
from tests.agent.ec2 import stubbed_ec2
from tests.health.kube_api import MERGE_PATCH, ApiServer, node, pod
from tests.topology import recorded

SETTINGS = TopologySettings("ec2", "slurm", "app.kubernetes.io/name=slurmd", "slurm-eks-topology")
ALL = sorted(recorded.instance_id(k) for k in range(1, 10))


def answer_recorded(stub: Stubber, ids: Sequence[str]) -> None:
    """Expect one listing of `ids` (exactly these InstanceIds, no MaxResults): page 1, then page 2 for page 1's
    NextToken, each limited to the instances asked for."""
    first, second = recorded.pages()
    for page in (first, second):
        page["Instances"] = [i for i in page["Instances"] if i["InstanceId"] in ids]
    stub.add_response(OPERATION, first, {"InstanceIds": list(ids)})
    stub.add_response(OPERATION, second, {"InstanceIds": list(ids), "NextToken": first["NextToken"]})


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


def test_writes_the_tree_and_annotates_each_node(cluster: ApiServer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[dict] = []
    ec2, stub = stubbed_ec2(monkeypatch)
    answer_recorded(stub, ALL)
    text = topology_pass(cluster.client(), ec2, SETTINGS, events.append)
    (topology,) = yaml.safe_load(cluster.configmaps[("slurm", "slurm-eks-topology")]["data"]["topology.yaml"])
    assert yaml.safe_load(text) == [topology] and topology["cluster_default"] is True
    switches = {s["switch"]: s for s in topology["tree"]["switches"]}
    assert switches[recorded.LEAF_135]["nodes"] == "gpu-h100-0,gpu-h100-2,gpu-h100-4"
    assert switches["unplaced"]["nodes"] == "gpu-h100-8"  # the m5 instance EC2 has no topology for
    specs = {name: n["metadata"]["annotations"][ANNOTATION] for name, n in cluster.nodes.items()}
    assert specs["ip-10-0-0-1"] == f"ec2:{recorded.LEAF_135}" and specs["ip-10-0-0-9"] == "ec2:unplaced"
    assert cluster.nodes["ip-10-0-0-1"]["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] == "0"
    stub.assert_no_pending_responses()  # both pages read
    (listed,) = [r for r in cluster.requests if r.path == "/api/v1/namespaces/slurm/pods"]
    assert listed.method == "GET" and listed.query == {"labelSelector": ["app.kubernetes.io/name=slurmd"]}
    patches = [r for r in cluster.requests if r.method == "PATCH"]
    assert {r.path for r in patches} == {f"/api/v1/nodes/ip-10-0-0-{k}" for k in range(1, 10)}
    assert {r.content_type for r in patches} == {MERGE_PATCH}  # RFC 7386, not strategic merge nor JSON patch
    assert [(r.method, r.path) for r in cluster.requests if r.method == "PUT"] == [
        ("PUT", "/api/v1/namespaces/slurm/configmaps/slurm-eks-topology")]
    assert sum(e["event"] == "topology-annotated" for e in events) == 9


def test_a_second_pass_with_nothing_new_writes_nothing(cluster: ApiServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    kube = cluster.client()
    ec2, stub = stubbed_ec2(monkeypatch)
    answer_recorded(stub, ALL)
    answer_recorded(stub, ALL)  # no `known` kept between the passes: asked again
    topology_pass(kube, ec2, SETTINGS, lambda e: None)
    cluster.requests.clear()
    topology_pass(kube, ec2, SETTINGS, lambda e: None)
    stub.assert_no_pending_responses()
    assert [r.method for r in cluster.requests if r.method != "GET"] == []


def test_before_any_slurmd_pod_runs_the_topology_is_flat(monkeypatch: pytest.MonkeyPatch) -> None:
    ec2, _ = stubbed_ec2(monkeypatch)  # nothing queued: a call would fail
    fake = ApiServer()
    try:
        fake.configmaps[("slurm", "slurm-eks-topology")] = {
            "apiVersion": "v1", "kind": "ConfigMap", "data": {},
            "metadata": {"name": "slurm-eks-topology", "namespace": "slurm", "resourceVersion": "5"}}
        text = topology_pass(fake.client(), ec2, SETTINGS, lambda e: None)
        assert yaml.safe_load(text) == [{"topology": "ec2", "cluster_default": True, "flat": True}]
    finally:
        fake.close()


def test_ec2_is_asked_only_about_instances_it_has_not_placed(cluster: ApiServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    kube, known = cluster.client(), {}
    ec2, stub = stubbed_ec2(monkeypatch)
    answer_recorded(stub, ALL)
    topology_pass(kube, ec2, SETTINGS, lambda e: None, known)
    assert len(known) == 8  # the uncovered m5 instance has no place: asked again next time
    answer_recorded(stub, [recorded.UNCOVERED])  # (the recorded pages page through it, as listed)
    topology_pass(kube, ec2, SETTINGS, lambda e: None, known)
    stub.assert_no_pending_responses()
