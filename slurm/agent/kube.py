"""The few Kubernetes API calls the lifecycle controller makes, through the official client (`kubernetes`, pinned
in slurm/agent/requirements.in): core/v1 Pods, Nodes and ConfigMaps (CoreV1Api), and Karpenter's NodeClaims
(karpenter.sh/v1, cluster-scoped per the CRD in ../shared/crds/karpenter/karpenter.sh_nodeclaims.yaml,
aws/karpenter-provider-aws v1.14.1) through CustomObjectsApi.

Results stay dicts, the API server's JSON as sent: every call asks for `_preload_content=False` and decodes the
body itself, so a ConfigMap read and PUT back is byte for byte what the server gave (no round trip through the
generated models, which turn timestamps into datetimes and drop fields they do not know), a NodeList of a big
cluster is not turned into thousands of model objects, and NodeClaims (plain dicts from CustomObjectsApi anyway)
look like everything else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")  # group, version, plural
# kubernetes 36.0.x kubernetes/client/api/core_v1_api.py patch_node offers the json-patch, merge-patch,
# strategic-merge-patch and apply-patch types; api_client.select_header_content_type picks the first
# (json-patch+json) for a dict body, which rest.py then rewrites to strategic-merge-patch+json. We mean RFC 7386.
MERGE_PATCH = "application/merge-patch+json"


class KubeError(RuntimeError):
    """The API server answered with an error (or could not be reached: code 0)."""

    def __init__(self, message: str, code: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.code, self.reason = code, reason


class NotFound(KubeError):
    pass


class Conflict(KubeError):
    """409: the object changed since we read it (resourceVersion) or already exists."""


def in_cluster_configuration() -> client.Configuration:
    """The pod's service account: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, its ca.crt, its token.

    kubernetes/config/incluster_config.py: the loader sets refresh_api_key_hook, which re-reads the token file
    when a minute has passed since it last read it, before each request, so the kubelet's hourly rotation of
    projected tokens needs nothing here."""
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return configuration


class Kube:
    def __init__(self, configuration: client.Configuration, timeout: float = 10.0) -> None:
        self.timeout = timeout
        api = client.ApiClient(configuration)
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    @classmethod
    def in_cluster(cls) -> Kube:
        return cls(in_cluster_configuration())

    def _call(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            reply = call(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
            return json.loads(reply.data or b"{}")
        except ApiException as exc:
            raise _error(what, exc) from None
        # The client wraps only TLS errors in ApiException (kubernetes/client/rest.py); a refused connection or a
        # timeout comes as urllib3's own error once its retries are spent.
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise KubeError(f"{what}: {exc}") from None

    def pod_node_name(self, pod: str, namespace: str = "slurm") -> str | None:
        """spec.nodeName of the pod: the Kubernetes node it was scheduled to (None while pending)."""
        found = self._call(f"get pod {namespace}/{pod}", self.core.read_namespaced_pod, pod, namespace)
        return (found.get("spec") or {}).get("nodeName") or None

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self._call(f"list pods {namespace} {selector}", self.core.list_namespaced_pod, namespace,
                          label_selector=selector).get("items") or []

    def nodes(self) -> list[dict[str, Any]]:
        return self._call("list nodes", self.core.list_node).get("items") or []

    def annotate_node(self, name: str, annotations: dict[str, str]) -> None:
        """A JSON merge patch (RFC 7386) of the node's annotations: other fields and annotations stay."""
        self._call(f"patch node {name}", self.core.patch_node, name, {"metadata": {"annotations": annotations}},
                   _content_type=MERGE_PATCH)

    def nodeclaims(self) -> list[dict[str, Any]]:
        return self._call("list nodeclaims", self.custom.list_cluster_custom_object, *NODECLAIMS).get("items") or []

    def nodeclaim_for_node(self, node_name: str) -> str | None:
        """The NodeClaim whose status.nodeName is the node (kubernetes-sigs/karpenter v1.14.0
        pkg/apis/v1/nodeclaim_status.go: NodeClaimStatus.NodeName `json:"nodeName"`)."""
        for claim in self.nodeclaims():
            if (claim.get("status") or {}).get("nodeName") == node_name:
                return str(claim["metadata"]["name"])
        return None

    def delete_nodeclaim(self, name: str) -> None:
        # Karpenter's termination finalizer drains and terminates the instance; the NodePool makes a new one.
        self._call(f"delete nodeclaim {name}", self.custom.delete_cluster_custom_object, *NODECLAIMS, name)

    def get_configmap(self, name: str, namespace: str = "slurm") -> dict[str, Any] | None:
        try:
            return self._call(f"get configmap {namespace}/{name}", self.core.read_namespaced_config_map, name,
                              namespace)
        except NotFound:
            return None

    def replace_configmap(self, configmap: dict[str, Any]) -> dict[str, Any]:
        """PUT; with metadata.resourceVersion set the API server refuses (409) if it changed since."""
        meta = configmap["metadata"]
        return self._call(f"replace configmap {meta['namespace']}/{meta['name']}",
                          self.core.replace_namespaced_config_map, meta["name"], meta["namespace"], configmap)

    def create_configmap(self, configmap: dict[str, Any]) -> dict[str, Any]:
        """POST; 409 AlreadyExists if another writer created it first."""
        meta = configmap["metadata"]
        return self._call(f"create configmap {meta['namespace']}/{meta['name']}",
                          self.core.create_namespaced_config_map, meta["namespace"], configmap)


def _error(what: str, exc: ApiException) -> KubeError:
    # The body is a metav1 Status (kind Status, reason, message, code) when the API server answered at all.
    try:
        status = json.loads(exc.body or b"{}")
    except (TypeError, ValueError):
        status = {}
    status = status if isinstance(status, dict) else {}
    code = int(exc.status or 0)
    message = f"{what}: HTTP {code}: {status.get('message') or exc.reason}"
    kind = {404: NotFound, 409: Conflict}.get(code, KubeError)
    return kind(message, code, str(status.get("reason") or ""))
