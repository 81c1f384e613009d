"""`addons.kuberay`, `addons.mpiOperator`, `addons.volcano`: the batch operators Kubernetes-native jobs run
under, each in its own segmented namespace with its controllers on the system nodes, and the `ml` namespace
those jobs run in (`slurm-eks k8s render`), holding the same /shared and model claims as Slurm's pods."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml
from pulumi.runtime import settings
from pulumi.runtime.proto import resource_pb2_grpc

from components import upstream
from components.addons.k8s_operator_charts import KUBERAY, MPI_OPERATOR_MANIFEST, VOLCANO
from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.config.cluster import ClusterConfig
from components.findings import Finding
from components.kubernetes.charts import release
from components.kubernetes.namespaces import MPI_OPERATOR, RESTRICTED_CONTAINER, RESTRICTED_POD, Namespaces
from components.names import ML_NAMESPACE
from components.storage.efs import ModelStorage
from components.storage.fsx import SharedStorage

# distroless's nonroot user (gcr.io/distroless: uid 65532), which mpi-operator v0.8.0's image (distroless/base,
# no USER) has but does not use: the controller only talks to the API.
DISTROLESS_NONROOT = 65532


def kuberay_values() -> dict[str, Any]:
    # kuberay v1.7.0 helm-chart/kuberay-operator/values.yaml: nodeSelector, podSecurityContext (securityContext
    # is already restricted there).
    return {"nodeSelector": SYSTEM_NODE_SELECTOR, "podSecurityContext": RESTRICTED_POD}


def volcano_values() -> dict[str, Any]:
    # volcano v1.15.1 installer/helm/chart/volcano/values.yaml custom.default_ns: the nodeSelector of the
    # admission, controller and scheduler pods and the admission-init Job (templates/*.yaml `or <part>_ns
    # default_ns`).
    return {"custom": {"default_ns": SYSTEM_NODE_SELECTOR}}


def deploying() -> bool:
    """Whether a Pulumi engine runs the program (`pulumi up`, `pulumi preview`): only then may it download an
    upstream file. The offline plan (its mocks' monitor) and a plain call outside Pulumi read the cache only."""
    return isinstance(settings.get_monitor(), resource_pb2_grpc.ResourceMonitorStub)


def upstream_problems(config: ClusterConfig, cache: Path | None = None) -> list[Finding]:
    """The upstream files the config's add-ons need that the cache lacks or holds with other bytes: the offline
    plan checks these first, as it never downloads. A stack without addons.mpiOperator needs none."""
    if config.addons.mpi_operator is None:
        return []
    problem = upstream.cache_problem(MPI_OPERATOR_MANIFEST, cache)
    if problem is None:
        return []
    path = (cache or upstream.CACHE) / MPI_OPERATOR_MANIFEST.path
    return [Finding(rule="upstream-cache", severity="error", path="addons.mpiOperator", value=str(path),
                    message=f"the MPI Operator's release manifest: {problem}", fix=upstream.FIX)]


def mpi_operator_objects(cache: Path | None = None, download: bool = False) -> list[dict[str, Any]]:
    """The release manifest's objects (read from the upstream cache, SHA-256 checked; with `download`, fetched
    into it when missing), its Namespace left out (Namespaces.create makes it with Pod Security labels and
    policies) and its controller on the system nodes as a non-root user. Raises upstream.UpstreamError."""
    raw = upstream.read(MPI_OPERATOR_MANIFEST, cache, download=download)
    objects = [o for o in yaml.safe_load_all(raw) if o and o["kind"] != "Namespace"]
    for obj in objects:
        if obj["kind"] == "Deployment":
            spec = obj["spec"]["template"]["spec"]
            spec["nodeSelector"] = dict(SYSTEM_NODE_SELECTOR)
            spec["securityContext"] = {**RESTRICTED_POD, "runAsUser": DISTROLESS_NONROOT,
                                       "runAsGroup": DISTROLESS_NONROOT}
            for container in spec["containers"]:
                container["securityContext"] = copy.deepcopy(RESTRICTED_CONTAINER)
    return objects


def apply_object(prefix: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """One object of a release manifest as its typed resource (what `kubectl apply` would create), so the plan
    and the deploy check see the Deployment's pod template and the CRD."""
    kind, meta = obj["kind"], obj["metadata"]
    name = f"{prefix}-{kind.lower()}-{meta['name']}"
    if kind == "CustomResourceDefinition":
        return k8s.apiextensions.v1.CustomResourceDefinition(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "ServiceAccount":
        return k8s.core.v1.ServiceAccount(name, metadata=meta, opts=opts)
    if kind == "ClusterRole":
        return k8s.rbac.v1.ClusterRole(name, metadata=meta, rules=obj.get("rules"),
                                       aggregation_rule=obj.get("aggregationRule"), opts=opts)
    if kind == "ClusterRoleBinding":
        return k8s.rbac.v1.ClusterRoleBinding(name, metadata=meta, role_ref=obj["roleRef"], subjects=obj["subjects"],
                                              opts=opts)
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(name, metadata=meta, spec=obj["spec"], opts=opts)
    raise ValueError(f"{MPI_OPERATOR_MANIFEST.url}: no mapping for kind {kind}")


@dataclass(frozen=True)
class K8sOperatorsArgs:
    config: ClusterConfig
    namespaces: Namespaces
    storage: SharedStorage
    models: ModelStorage | None  # None: storage.efs unset, no model claim


class K8sOperators(pulumi.ComponentResource):
    """The operators the config turns on, and the `ml` namespace with its claims when any is on."""

    def __init__(self, name: str, args: K8sOperatorsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:K8sOperators", name, None, opts)
        addons, ns, provider = args.config.addons, args.namespaces, args.namespaces.provider
        if addons.kuberay is not None:
            release("kuberay-operator", KUBERAY, kuberay_values(), provider, self,
                    ns.create(f"{name}-kuberay", KUBERAY.namespace, self))
        if addons.volcano is not None:
            release("volcano", VOLCANO, volcano_values(), provider, self,
                    ns.create(f"{name}-volcano", VOLCANO.namespace, self))
        if addons.mpi_operator is not None:
            created = ns.create(f"{name}-mpi-operator", MPI_OPERATOR, self)
            mpi_opts = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=created)
            try:
                mpi_objects = mpi_operator_objects(download=deploying())
            except upstream.UpstreamError as error:
                raise pulumi.RunError(f"addons.mpiOperator: {error}") from None  # the message, no traceback
            for obj in mpi_objects:
                apply_object(f"{name}-mpi-operator", obj, mpi_opts)
        self.claims: list[pulumi.Resource] = []
        if addons.batch_operators:
            workloads = ns.create(f"{name}-ml", ML_NAMESPACE, self)
            self.claims = args.storage.claim_in(ML_NAMESPACE, workloads)
            if args.models is not None:
                self.claims += args.models.claim_in(ML_NAMESPACE, workloads)
        self.register_outputs({})
