"""A local stand-in for the Kubernetes API server, at the HTTP level, for the official client to talk to.

It answers the REST paths slurm/agent/kube.py's calls use with objects shaped like the real ones: core/v1 Pods
(LIST with an equality labelSelector), Nodes (PATCH: JSON merge patch, RFC 7386), ConfigMaps (PUT refused with
409 Conflict on a stale resourceVersion, POST with 409 AlreadyExists), karpenter.sh/v1 NodeClaims at their
cluster-scoped path (aws/karpenter-provider-aws v1.14.1 pkg/apis/crds/karpenter.sh_nodeclaims.yaml, copy in
../shared/crds/karpenter: scope Cluster), and metav1 Status objects for errors (k8s.io/apimachinery
pkg/apis/meta/v1 types.go Status). Anything else is a 404, as the API server answers an unknown path. Every
request is recorded (method, path, query, Content-Type, body, Authorization) so tests can hold the client to
the exact calls.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client

from slurm.agent.kube import Kube

TOKEN = "sa-token-1"
MERGE_PATCH = "application/merge-patch+json"
# What the API server accepts for a PATCH of a built-in kind (k8s.io/apiserver pkg/endpoints/handlers/patch.go);
# json-patch with an object body fails to decode there, as here.
PATCH_TYPES = (MERGE_PATCH, "application/strategic-merge-patch+json")
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str | None
    body: Any
    authorization: str | None


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


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2 MergePatch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def selects(selector: str, labels: dict[str, str]) -> bool:
    """An equality-based label selector (`k=v`, `k==v`, `k!=v`, comma-separated: all must hold)."""
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        else:
            key, value = re.split("==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
    return True


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (IP SAN, so the client's hostname check passes) and its key: the stand-in's
    serving certificate and, as the pod's ca.crt, the CA the client verifies it with."""
    from datetime import UTC, datetime, timedelta
    from ipaddress import IPv4Address

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "apiserver.crt", directory / "apiserver.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class ApiServer:
    """Plain HTTP, or HTTPS with `tls` (certificate and key files, e.g. from self_signed)."""

    def __init__(self, tls: tuple[Path, Path] | None = None) -> None:
        self.pods: dict[str, dict[str, Any]] = {}  # namespace slurm
        self.nodes: dict[str, dict[str, Any]] = {}
        self.nodeclaims: dict[str, dict[str, Any]] = {}
        self.configmaps: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.fail: dict[tuple[str, str], int] = {}  # (method, path regex) -> HTTP code to answer instead
        self.token = TOKEN
        self._rv = 1000
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                split = urllib.parse.urlsplit(self.path)
                request = Request(self.command, split.path, urllib.parse.parse_qs(split.query),
                                  self.headers.get("Content-Type"), json.loads(raw) if raw else None,
                                  self.headers.get("Authorization"))
                with api._lock:
                    api.requests.append(request)
                    code, answer = api.answer(request)
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
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def configuration(self) -> client.Configuration:
        """The client pointed here, with the token as the pod's loaders leave it (api_key['authorization'])."""
        return client.Configuration(host=self.url, api_key={"authorization": f"Bearer {self.token}"})

    def client(self) -> Kube:
        return Kube(self.configuration(), timeout=5)

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.requests]

    def deletes(self) -> list[str]:
        return [r.path for r in self.requests if r.method == "DELETE"]

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _list(self, kind: str, items: list[dict[str, Any]], api_version: str = "v1") -> tuple[int, dict[str, Any]]:
        return 200, {"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": str(self._rv)},
                     "items": items}

    def answer(self, request: Request) -> tuple[int, dict[str, Any]]:
        method, path = request.method, request.path
        scheme, _, token = (request.authorization or "").partition(" ")
        # k8s.io/apiserver pkg/authentication/request/bearertoken: the scheme is matched case-insensitively
        if scheme.lower() != "bearer" or token.strip() != self.token:
            return 401, status(401, "Unauthorized", "Unauthorized")
        for (fail_method, pattern), code in self.fail.items():
            if fail_method == method and re.fullmatch(pattern, path):
                return code, status(code, "InternalError", "etcdserver: request timed out")
        if path == "/api/v1/namespaces/slurm/pods" and method == "GET":
            selector = (request.query.get("labelSelector") or [""])[0]
            return self._list("PodList", [p for p in self.pods.values()
                                          if selects(selector, p["metadata"].get("labels") or {})])
        if (match := re.fullmatch(r"/api/v1/namespaces/slurm/pods/([^/]+)", path)) and method == "GET":
            found = self.pods.get(match[1])
            return (200, found) if found else (404, status(404, "NotFound", f'pods "{match[1]}" not found'))
        if path == "/api/v1/nodes" and method == "GET":
            return self._list("NodeList", list(self.nodes.values()))
        if match := re.fullmatch(r"/api/v1/nodes/([^/]+)", path):
            return self._node(request, match[1])
        if path == NODECLAIMS and method == "GET":
            return self._list("NodeClaimList", list(self.nodeclaims.values()), "karpenter.sh/v1")
        if (match := re.fullmatch(NODECLAIMS + r"/([^/]+)", path)) and method == "DELETE":
            found = self.nodeclaims.pop(match[1], None)
            if not found:
                return 404, status(404, "NotFound", f'nodeclaims.karpenter.sh "{match[1]}" not found')
            # With a finalizer the API server answers 200 with the object, deletionTimestamp set.
            found = copy.deepcopy(found)
            found["metadata"]["deletionTimestamp"] = "2026-12-01T11:00:00Z"
            return 200, found
        if match := re.fullmatch(r"/api/v1/namespaces/([^/]+)/configmaps(?:/([^/]+))?", path):
            return self._configmap(method, match[1], match[2], request.body)
        return 404, status(404, "NotFound", "the server could not find the requested resource")

    def _node(self, request: Request, name: str) -> tuple[int, dict[str, Any]]:
        found = self.nodes.get(name)
        if not found:
            return 404, status(404, "NotFound", f'nodes "{name}" not found')
        if request.method == "PATCH":
            if request.content_type not in PATCH_TYPES:
                return 415, status(415, "UnsupportedMediaType", "the body of the request was in an unknown format")
            # For metadata.annotations (a map) strategic merge and RFC 7386 merge agree; tests tell them apart
            # by the Content-Type recorded.
            found = merge_patch(found, request.body)
            found["metadata"]["resourceVersion"] = self._next_rv()
            self.nodes[name] = found
        elif request.method != "GET":
            return 405, status(405, "MethodNotAllowed", request.method)
        return 200, found

    def _configmap(self, method: str, namespace: str, name: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        if method == "GET" and name:
            found = self.configmaps.get((namespace, name))
            return (200, found) if found else (404, status(404, "NotFound", f'configmaps "{name}" not found'))
        if method == "POST" and not name:
            key = (namespace, body["metadata"]["name"])
            if key in self.configmaps:
                return 409, status(409, "AlreadyExists", f'configmaps "{key[1]}" already exists')
            stored = copy.deepcopy(body)
            stored["metadata"]["resourceVersion"] = self._next_rv()
            self.configmaps[key] = stored
            return 201, stored
        if method == "PUT" and name:
            current = self.configmaps.get((namespace, name))
            if current is None:
                return 404, status(404, "NotFound", f'configmaps "{name}" not found')
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return 409, status(409, "Conflict", f'Operation cannot be fulfilled on configmaps "{name}": the '
                                   "object has been modified; please apply your changes to the latest version")
            stored = copy.deepcopy(body)
            stored["metadata"]["resourceVersion"] = self._next_rv()
            self.configmaps[(namespace, name)] = stored
            return 200, stored
        return 405, status(405, "MethodNotAllowed", method)
