"""slurm/health/kube.py against a real local HTTP server playing the Kubernetes API server.

FakeKube (also used by test_controller.py) answers the REST paths with objects shaped like the real ones: a
core/v1 Pod, karpenter.sh/v1 NodeClaims (checked here against the CRD's structural schema, aws/karpenter-provider-aws
v1.14.1 pkg/apis/crds/karpenter.sh_nodeclaims.yaml, copy in ../shared/crds/karpenter), core/v1 ConfigMaps with
resourceVersion optimistic concurrency, and metav1 Status objects for errors. It records every request.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from slurm.health.kube import Conflict, Kube, KubeError, NotFound
from tests.conftest import require_module

TOKEN = "sa-token-1"


def pod(name: str, node_name: str | None, nodeset: str = "gpu-h100") -> dict[str, Any]:
    """A slurmd pod of a Slinky NodeSet (labels: SlinkyProject/slurm-operator v1.2.1 api/v1beta1/well_known.go)."""
    spec: dict[str, Any] = {"containers": [{"name": "slurmd", "image": "ghcr.io/slinkyproject/slurmd:25.11"}],
                            "hostname": name, "subdomain": "slurm-compute"}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "slurm", "uid": f"uid-{name}", "resourceVersion": "100",
                         "labels": {"app.kubernetes.io/name": "slurmd", "app.kubernetes.io/instance": nodeset,
                                    "nodeset.slinky.slurm.net/pod-name": name,
                                    "nodeset.slinky.slurm.net/pod-index": name.rsplit("-", 1)[1]}},
            "spec": spec, "status": {"phase": "Running" if node_name else "Pending"}}


def node(name: str, instance: str, zone: str = "us-west-2a") -> dict[str, Any]:
    """A core/v1 Node as the AWS cloud provider registers it (spec.providerID aws:///<zone>/<instance id>)."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "300",
                         "labels": {"topology.kubernetes.io/zone": zone, "karpenter.sh/nodepool": "gpu-h100"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"providerID": f"aws:///{zone}/{instance}"}}


def nodeclaim(name: str, node_name: str, nodepool: str = "gpu-h100") -> dict[str, Any]:
    """A launched, registered NodeClaim (fields per the karpenter.sh_nodeclaims.yaml CRD, v1)."""
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "200",
                         "finalizers": ["karpenter.sh/termination"],
                         "labels": {"karpenter.sh/nodepool": nodepool,
                                    "node.kubernetes.io/instance-type": "p5.48xlarge"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodepool},
                     "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                       "values": ["p5.48xlarge"]}],
                     "resources": {"requests": {"cpu": "1"}}},
            "status": {"nodeName": node_name, "providerID": f"aws:///us-east-1a/i-0{name.encode().hex()[:16]}",
                       "imageID": "ami-0123456789abcdef0",
                       "capacity": {"cpu": "192", "memory": "2000Gi", "nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                       "lastTransitionTime": "2026-12-01T10:00:00Z"}]}}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    # k8s.io/apimachinery pkg/apis/meta/v1 types.go Status
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class FakeKube:
    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.nodeclaims: dict[str, dict[str, Any]] = {}
        self.configmaps: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.fail: dict[tuple[str, str], int] = {}  # (method, path regex) -> HTTP code to answer instead
        self.token = TOKEN
        self._rv = 1000
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                with fake._lock:
                    fake.requests.append((self.command, self.path, body))
                    if self.command == "PATCH" and self.headers.get("Content-Type") != "application/merge-patch+json":
                        code, answer = 415, _status(415, "UnsupportedMediaType", "the body of the request was in "
                                                    "an unknown format")
                    else:
                        code, answer = fake.answer(self.command, self.path, body,
                                                   self.headers.get("Authorization"))
                data = json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def deletes(self) -> list[str]:
        return [path for method, path, _ in self.requests if method == "DELETE"]

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def answer(self, method: str, path: str, body: Any, auth: str | None) -> tuple[int, dict[str, Any]]:
        if auth != f"Bearer {self.token}":
            return 401, _status(401, "Unauthorized", "Unauthorized")
        for (fail_method, pattern), code in self.fail.items():
            if fail_method == method and re.fullmatch(pattern, path):
                return code, _status(code, "InternalError", "etcdserver: request timed out")
        if match := re.fullmatch(r"/api/v1/namespaces/slurm/pods\?labelSelector=([^&]+)", path):
            key, _, value = urllib.parse.unquote(match[1]).partition("=")
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": str(self._rv)},
                         "items": [p for p in self.pods.values() if p["metadata"]["labels"].get(key) == value]}
        if path == "/api/v1/nodes" and method == "GET":
            return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": str(self._rv)},
                         "items": list(self.nodes.values())}
        if match := re.fullmatch(r"/api/v1/nodes/([^/]+)", path):
            found = self.nodes.get(match[1])
            if not found:
                return 404, _status(404, "NotFound", f'nodes "{match[1]}" not found')
            if method == "PATCH":  # a JSON merge patch of metadata.annotations (RFC 7386)
                found["metadata"].setdefault("annotations", {}).update(body["metadata"]["annotations"])
                found["metadata"]["resourceVersion"] = self._next_rv()
            return 200, found
        if match := re.fullmatch(r"/api/v1/namespaces/slurm/pods/([^/]+)", path):
            found = self.pods.get(match[1])
            return (200, found) if found else (404, _status(404, "NotFound", f'pods "{match[1]}" not found'))
        if path == "/apis/karpenter.sh/v1/nodeclaims" and method == "GET":
            return 200, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaimList",
                         "metadata": {"resourceVersion": str(self._rv)}, "items": list(self.nodeclaims.values())}
        if (match := re.fullmatch(r"/apis/karpenter.sh/v1/nodeclaims/([^/]+)", path)) and method == "DELETE":
            found = self.nodeclaims.pop(match[1], None)
            if not found:
                return 404, _status(404, "NotFound", f'nodeclaims.karpenter.sh "{match[1]}" not found')
            # With a finalizer the API server answers 200 with the object, deletionTimestamp set.
            found = copy.deepcopy(found)
            found["metadata"]["deletionTimestamp"] = "2026-12-01T11:00:00Z"
            return 200, found
        if match := re.fullmatch(r"/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?", path):
            return self._configmap(method, match[1], match[2], body)
        return 404, _status(404, "NotFound", "the server could not find the requested resource")

    def _configmap(self, method: str, namespace: str, name: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        if method == "GET" and name:
            found = self.configmaps.get((namespace, name))
            return (200, found) if found else (404, _status(404, "NotFound", f'configmaps "{name}" not found'))
        if method == "POST" and not name:
            key = (namespace, body["metadata"]["name"])
            if key in self.configmaps:
                return 409, _status(409, "AlreadyExists", f'configmaps "{key[1]}" already exists')
            stored = copy.deepcopy(body)
            stored["metadata"]["resourceVersion"] = self._next_rv()
            self.configmaps[key] = stored
            return 201, stored
        if method == "PUT" and name:
            current = self.configmaps.get((namespace, name))
            if current is None:
                return 404, _status(404, "NotFound", f'configmaps "{name}" not found')
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on configmaps "{name}": the '
                                    "object has been modified; please apply your changes to the latest version")
            stored = copy.deepcopy(body)
            stored["metadata"]["resourceVersion"] = self._next_rv()
            self.configmaps[(namespace, name)] = stored
            return 200, stored
        return 405, _status(405, "MethodNotAllowed", method)


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    yield fake
    fake.close()


def client(fake: FakeKube, tmp_path: Path) -> Kube:
    token = tmp_path / "token"
    token.write_text(fake.token + "\n")
    return Kube(fake.url, token)


def test_nodeclaim_fixture_is_valid_against_the_crd(crds_dir: Path) -> None:
    yaml = require_module("yaml", "PyYAML")
    jsonschema = require_module("jsonschema", "the manifests extra")
    crd = yaml.safe_load((crds_dir / "karpenter" / "karpenter.sh_nodeclaims.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["group"] == "karpenter.sh"
    schema = version["schema"]["openAPIV3Schema"]
    assert "nodeName" in schema["properties"]["status"]["properties"]
    jsonschema.validate(nodeclaim("gpu-h100-x7k2p", "ip-10-0-1-20.ec2.internal"), schema)
    broken = nodeclaim("gpu-h100-x7k2p", "n")
    del broken["spec"]["nodeClassRef"]  # required by the CRD: a fixture missing it must fail
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_pod_node_name_and_nodeclaim_lookup(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-1-20.ec2.internal")
    fake_kube.pods["gpu-h100-1"] = pod("gpu-h100-1", None)
    fake_kube.nodeclaims["gpu-h100-abcde"] = nodeclaim("gpu-h100-abcde", "ip-10-0-1-21.ec2.internal")
    fake_kube.nodeclaims["gpu-h100-x7k2p"] = nodeclaim("gpu-h100-x7k2p", "ip-10-0-1-20.ec2.internal")
    kube = client(fake_kube, tmp_path)
    assert kube.pod_node_name("gpu-h100-0") == "ip-10-0-1-20.ec2.internal"
    assert kube.pod_node_name("gpu-h100-1") is None  # pending: not scheduled yet
    with pytest.raises(NotFound):
        kube.pod_node_name("gpu-h100-9")
    assert kube.nodeclaim_for_node("ip-10-0-1-20.ec2.internal") == "gpu-h100-x7k2p"
    assert kube.nodeclaim_for_node("ip-10-0-9-9.ec2.internal") is None
    kube.delete_nodeclaim("gpu-h100-x7k2p")
    assert fake_kube.deletes() == ["/apis/karpenter.sh/v1/nodeclaims/gpu-h100-x7k2p"]
    with pytest.raises(NotFound):
        kube.delete_nodeclaim("gpu-h100-x7k2p")


def test_token_is_reread_on_every_call(fake_kube: FakeKube, tmp_path: Path) -> None:
    kube = client(fake_kube, tmp_path)
    assert kube.nodeclaims() == []
    fake_kube.token = "sa-token-2"  # the kubelet rotated it
    with pytest.raises(KubeError) as refused:
        kube.nodeclaims()
    assert refused.value.code == 401
    (tmp_path / "token").write_text("sa-token-2")
    assert kube.nodeclaims() == []


def test_configmap_replace_is_refused_when_it_changed(fake_kube: FakeKube, tmp_path: Path) -> None:
    kube = client(fake_kube, tmp_path)
    assert kube.get_configmap("ledger") is None
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ledger", "namespace": "slurm"},
            "data": {"k": "1"}}
    created = kube.create_configmap(body)
    with pytest.raises(Conflict):
        kube.create_configmap(body)
    first = kube.replace_configmap({**created, "data": {"k": "2"}})
    with pytest.raises(Conflict):  # stale resourceVersion
        kube.replace_configmap({**created, "data": {"k": "3"}})
    assert kube.get_configmap("ledger")["data"] == {"k": "2"} == first["data"]


def test_server_errors_and_unreachable_raise_kube_error(fake_kube: FakeKube, tmp_path: Path) -> None:
    fake_kube.fail[("GET", r"/apis/karpenter.sh/v1/nodeclaims")] = 500
    with pytest.raises(KubeError) as failed:
        client(fake_kube, tmp_path).nodeclaims()
    assert failed.value.code == 500 and "etcdserver" in str(failed.value)
    with pytest.raises(KubeError):
        Kube("http://127.0.0.1:1", None, timeout=2).nodeclaims()


def test_in_cluster_reads_the_service_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.100.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(Kube, "__init__", lambda self, url, token, ca=None, timeout=10.0: setattr(
        self, "args", (url, str(token), str(ca))))
    kube = Kube.in_cluster()
    assert kube.args == ("https://10.100.0.1:443", "/var/run/secrets/kubernetes.io/serviceaccount/token",
                         "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
