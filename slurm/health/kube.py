"""The few Kubernetes API calls the repair controller makes, over HTTPS with the pod's service account.

Standard library only: this runs in the cluster. Paths are the API server's REST paths (core v1 for pods and
ConfigMaps; karpenter.sh/v1 NodeClaims, cluster-scoped, per the CRD in ../shared/crds/karpenter/
karpenter.sh_nodeclaims.yaml, aws/karpenter-provider-aws v1.14.1).
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"


class KubeError(RuntimeError):
    """The API server answered with an error (or could not be reached: code 0)."""

    def __init__(self, message: str, code: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: the object changed since we read it (resourceVersion) or already exists."""


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class Kube:
    def __init__(self, base_url: str, token_path: str | Path | None, ca_path: str | Path | None = None,
                 timeout: float = 10.0) -> None:
        self.base_url, self.timeout = base_url.rstrip("/"), timeout
        self.token_path = Path(token_path) if token_path else None
        self._ssl = ssl.create_default_context(cafile=str(ca_path)) if ca_path else None

    @classmethod
    def in_cluster(cls) -> Kube:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        host = f"[{host}]" if ":" in host else host  # an IPv6 cluster's service address
        return cls(f"https://{host}:{port}", SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt")

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                content_type: str = "application/json") -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if self.token_path:
            # Re-read each call: the kubelet rotates projected service-account tokens (about hourly).
            headers["Authorization"] = f"Bearer {self.token_path.read_text().strip()}"
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body).encode(), content_type
        http = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(http, timeout=self.timeout, context=self._ssl) as reply:
                return json.loads(reply.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise _error(method, path, exc) from None
        except (OSError, ValueError) as exc:
            raise KubeError(f"{method} {path}: {exc}") from None

    def pod_node_name(self, pod: str, namespace: str = "slurm") -> str | None:
        """spec.nodeName of the pod: the Kubernetes node it was scheduled to (None while pending)."""
        return self.request("GET", f"/api/v1/namespaces/{_q(namespace)}/pods/{_q(pod)}").get("spec", {}).get(
            "nodeName") or None

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        query = urllib.parse.urlencode({"labelSelector": selector})
        return self.request("GET", f"/api/v1/namespaces/{_q(namespace)}/pods?{query}").get("items") or []

    def nodes(self) -> list[dict[str, Any]]:
        return self.request("GET", "/api/v1/nodes").get("items") or []

    def annotate_node(self, name: str, annotations: dict[str, str]) -> None:
        """A JSON merge patch (RFC 7386) of the node's annotations: other fields and annotations stay."""
        self.request("PATCH", f"/api/v1/nodes/{_q(name)}", {"metadata": {"annotations": annotations}},
                     content_type="application/merge-patch+json")

    def nodeclaims(self) -> list[dict[str, Any]]:
        return self.request("GET", NODECLAIMS).get("items") or []

    def nodeclaim_for_node(self, node_name: str) -> str | None:
        """The NodeClaim whose status.nodeName is the node (kubernetes-sigs/karpenter v1.14.0
        pkg/apis/v1/nodeclaim_status.go: NodeClaimStatus.NodeName `json:"nodeName"`)."""
        for claim in self.nodeclaims():
            if (claim.get("status") or {}).get("nodeName") == node_name:
                return str(claim["metadata"]["name"])
        return None

    def delete_nodeclaim(self, name: str) -> None:
        # Karpenter's termination finalizer drains and terminates the instance; the NodePool makes a new one.
        self.request("DELETE", f"{NODECLAIMS}/{_q(name)}")

    def get_configmap(self, name: str, namespace: str = "slurm") -> dict[str, Any] | None:
        try:
            return self.request("GET", f"/api/v1/namespaces/{_q(namespace)}/configmaps/{_q(name)}")
        except NotFound:
            return None

    def replace_configmap(self, configmap: dict[str, Any]) -> dict[str, Any]:
        """PUT; with metadata.resourceVersion set the API server refuses (409) if it changed since."""
        meta = configmap["metadata"]
        return self.request("PUT", f"/api/v1/namespaces/{_q(meta['namespace'])}/configmaps/{_q(meta['name'])}",
                            configmap)

    def create_configmap(self, configmap: dict[str, Any]) -> dict[str, Any]:
        """POST; 409 AlreadyExists if another writer created it first."""
        return self.request("POST", f"/api/v1/namespaces/{_q(configmap['metadata']['namespace'])}/configmaps",
                            configmap)


def _error(method: str, path: str, exc: urllib.error.HTTPError) -> KubeError:
    # Errors come as a metav1 Status object (kind Status, reason, message, code).
    try:
        status = json.loads(exc.read() or b"{}")
    except ValueError:
        status = {}
    message = f"{method} {path}: HTTP {exc.code}: {status.get('message') or exc.reason}"
    kind = {404: NotFound, 409: Conflict}.get(exc.code, KubeError)
    return kind(message, exc.code, str(status.get("reason") or ""))
