"""slurm/agent/kube.py (the official kubernetes client) against tests/health/kube_api.py, a local HTTP server
playing the Kubernetes API server: each call is held to the request it must make (method, path, query,
Content-Type), so a call changed to a wrong one (a namespaced NodeClaim path, a strategic-merge patch, another
selector) fails here."""

from __future__ import annotations

import datetime
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.config import incluster_config

from slurm.agent.kube import MERGE_PATCH, Conflict, Kube, KubeError, NotFound, in_cluster_configuration
from tests.conftest import require_module
from tests.health.kube_api import NODECLAIMS, ApiServer, Request, node, nodeclaim, pod, self_signed


@pytest.fixture
def api() -> Iterator[ApiServer]:
    server = ApiServer()
    yield server
    server.close()


def last(api: ApiServer) -> Request:
    return api.requests[-1]


def test_nodeclaim_fixture_is_valid_against_the_crd(crds_dir: Path) -> None:
    yaml = require_module("yaml", "PyYAML")
    jsonschema = require_module("jsonschema", "the manifests extra")
    crd = yaml.safe_load((crds_dir / "karpenter" / "karpenter.sh_nodeclaims.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    # the stand-in serves NodeClaims at the cluster-scoped path because the CRD says so
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["group"] == "karpenter.sh"
    assert crd["spec"]["names"]["plural"] == NODECLAIMS.rsplit("/", 1)[1]
    schema = version["schema"]["openAPIV3Schema"]
    assert "nodeName" in schema["properties"]["status"]["properties"]
    jsonschema.validate(nodeclaim("gpu-h100-x7k2p", "ip-10-0-1-20.ec2.internal"), schema)
    broken = nodeclaim("gpu-h100-x7k2p", "n")
    del broken["spec"]["nodeClassRef"]  # required by the CRD: a fixture missing it must fail
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_pod_node_name(api: ApiServer) -> None:
    api.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-1-20.ec2.internal")
    api.pods["gpu-h100-1"] = pod("gpu-h100-1", None)
    kube = api.client()
    assert kube.pod_node_name("gpu-h100-0") == "ip-10-0-1-20.ec2.internal"
    assert (last(api).method, last(api).path) == ("GET", "/api/v1/namespaces/slurm/pods/gpu-h100-0")
    assert last(api).authorization == f"Bearer {api.token}"
    assert kube.pod_node_name("gpu-h100-1") is None  # pending: not scheduled yet
    with pytest.raises(NotFound) as missing:
        kube.pod_node_name("gpu-h100-9")
    assert missing.value.code == 404 and missing.value.reason == "NotFound"


def test_nodeclaims_are_listed_and_deleted_at_the_cluster_scoped_path(api: ApiServer) -> None:
    api.nodeclaims["gpu-h100-abcde"] = nodeclaim("gpu-h100-abcde", "ip-10-0-1-21.ec2.internal")
    api.nodeclaims["gpu-h100-x7k2p"] = nodeclaim("gpu-h100-x7k2p", "ip-10-0-1-20.ec2.internal")
    kube = api.client()
    assert kube.nodeclaim_for_node("ip-10-0-1-20.ec2.internal") == "gpu-h100-x7k2p"
    assert kube.nodeclaim_for_node("ip-10-0-9-9.ec2.internal") is None
    assert api.calls() == [("GET", NODECLAIMS)] * 2
    kube.delete_nodeclaim("gpu-h100-x7k2p")
    assert api.calls()[-1] == ("DELETE", f"{NODECLAIMS}/gpu-h100-x7k2p")
    assert "gpu-h100-x7k2p" not in api.nodeclaims
    with pytest.raises(NotFound):
        kube.delete_nodeclaim("gpu-h100-x7k2p")


def test_pods_are_listed_by_label_selector(api: ApiServer) -> None:
    api.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-1-20.ec2.internal")
    api.pods["login-0"] = {**pod("login-0", "ip-10-0-1-9.ec2.internal"),
                           "metadata": {"name": "login-0", "namespace": "slurm",
                                        "labels": {"app.kubernetes.io/name": "login"}}}
    found = api.client().pods("slurm", "app.kubernetes.io/name=slurmd")
    assert [p["metadata"]["name"] for p in found] == ["gpu-h100-0"]
    request = last(api)
    assert (request.method, request.path) == ("GET", "/api/v1/namespaces/slurm/pods")
    assert request.query == {"labelSelector": ["app.kubernetes.io/name=slurmd"]}


def test_annotate_node_is_a_json_merge_patch(api: ApiServer) -> None:
    api.nodes["ip-10-0-0-1"] = node("ip-10-0-0-1", "i-0123456789abcdef0")
    kube = api.client()
    kube.annotate_node("ip-10-0-0-1", {"topology.slinky.slurm.net/spec": "ec2:nn-1"})
    request = last(api)
    assert (request.method, request.path, request.content_type) == ("PATCH", "/api/v1/nodes/ip-10-0-0-1",
                                                                    MERGE_PATCH)
    assert request.body == {"metadata": {"annotations": {"topology.slinky.slurm.net/spec": "ec2:nn-1"}}}
    assert api.nodes["ip-10-0-0-1"]["metadata"]["annotations"] == {
        "node.alpha.kubernetes.io/ttl": "0", "topology.slinky.slurm.net/spec": "ec2:nn-1"}  # the others stay
    assert [n["metadata"]["name"] for n in kube.nodes()] == ["ip-10-0-0-1"]
    assert api.calls()[-1] == ("GET", "/api/v1/nodes")


def test_configmap_replace_is_refused_when_it_changed(api: ApiServer) -> None:
    kube = api.client()
    assert kube.get_configmap("ledger") is None
    assert api.calls() == [("GET", "/api/v1/namespaces/slurm/configmaps/ledger")]
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ledger", "namespace": "slurm"},
            "data": {"k": "1"}}
    created = kube.create_configmap(body)
    assert (last(api).method, last(api).path, last(api).body) == ("POST", "/api/v1/namespaces/slurm/configmaps",
                                                                  body)
    with pytest.raises(Conflict) as exists:
        kube.create_configmap(body)
    assert exists.value.reason == "AlreadyExists"
    first = kube.replace_configmap({**created, "data": {"k": "2"}})
    assert (last(api).method, last(api).path) == ("PUT", "/api/v1/namespaces/slurm/configmaps/ledger")
    assert last(api).body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    with pytest.raises(Conflict) as stale:  # stale resourceVersion
        kube.replace_configmap({**created, "data": {"k": "3"}})
    assert stale.value.code == 409 and "has been modified" in str(stale.value)
    assert kube.get_configmap("ledger")["data"] == {"k": "2"} == first["data"]


def test_server_errors_and_unreachable_raise_kube_error(api: ApiServer) -> None:
    api.fail[("GET", NODECLAIMS)] = 500
    with pytest.raises(KubeError) as failed:
        api.client().nodeclaims()
    assert failed.value.code == 500 and "etcdserver" in str(failed.value)
    kube = api.client()
    api.token = "another"  # the token we hold is not (or no longer) valid
    with pytest.raises(KubeError) as refused:
        kube.nodes()
    assert refused.value.code == 401
    configuration = api.configuration()
    configuration.host, configuration.retries = "http://127.0.0.1:1", 0
    with pytest.raises(KubeError) as unreachable:
        Kube(configuration, timeout=2).nodeclaims()
    assert unreachable.value.code == 0


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[ApiServer]:
    require_module("cryptography", "cryptography (with moto, the dev extra)")
    server = ApiServer(tls=self_signed(tmp_path))
    yield server
    server.close()


@pytest.fixture
def service_account(tmp_path: Path, tls_api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pod's environment as kubernetes/config/incluster_config.py reads it: the service's host and port (the
    stand-in, over HTTPS) and the mounted token and CA (paths monkeypatched to a temporary directory)."""
    (tmp_path / "sa").mkdir()
    (tmp_path / "sa" / "token").write_text(tls_api.token)
    (tmp_path / "sa" / "ca.crt").write_bytes((tmp_path / "apiserver.crt").read_bytes())
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "sa" / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(tmp_path / "sa" / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(tls_api.port))
    return tmp_path / "sa"


class Clock:
    """Stands in for the datetime module incluster_config.py uses to decide when to re-read the token."""

    def __init__(self) -> None:
        self.at = datetime.datetime(2026, 12, 1, 10, 0)
        self.datetime = types.SimpleNamespace(now=lambda: self.at)
        self.timedelta = datetime.timedelta


def test_in_cluster_config_sends_the_service_account_token_and_rereads_it(
        service_account: Path, tls_api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(incluster_config, "datetime", clock)
    api = tls_api
    kube = Kube.in_cluster()
    configuration = kube.core.api_client.configuration
    assert (configuration.host, configuration.ssl_ca_cert) == (api.url, str(service_account / "ca.crt"))
    assert kube.nodes() == []  # over TLS, the certificate checked against the mounted ca.crt
    # The token reaches the request (kubernetes 36.0.0's loader wrote it where its auth_settings() did not look, so
    # every call went out anonymous: the pin is 36.0.3, slurm/agent/requirements.in)
    assert last(api).authorization == "bearer sa-token-1"
    (service_account / "token").write_text("sa-token-2")  # the kubelet rotated it
    api.token = "sa-token-2"
    clock.at += datetime.timedelta(seconds=61)  # the loader re-reads the file once a minute has passed
    assert kube.nodes() == [] and last(api).authorization == "bearer sa-token-2"
    (service_account / "token").write_text("sa-token-3")
    api.token = "sa-token-3"
    clock.at += datetime.timedelta(seconds=61)
    assert kube.nodes() == [] and last(api).authorization == "bearer sa-token-3"  # and again: the hook stays
    assert in_cluster_configuration().host == api.url


def test_a_server_the_mounted_ca_did_not_sign_is_refused(service_account: Path, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (service_account / "ca.crt").write_bytes(self_signed(tmp_path / "other")[0].read_bytes())
    configuration = in_cluster_configuration()
    configuration.retries = 0
    with pytest.raises(KubeError) as refused:
        Kube(configuration, timeout=5).nodes()
    assert refused.value.code == 0 and "CERTIFICATE_VERIFY_FAILED" in str(refused.value)


def test_in_cluster_outside_a_pod_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config.config_exception import ConfigException

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigException):
        Kube.in_cluster()
