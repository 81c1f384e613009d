"""Argo CD `Application` documents, for the tree `slurm-eks gitops export` writes and the root Application
Pulumi creates in gitops mode. Without Pulumi, so the export engine and the program share one builder.

Fields: argoproj/argo-cd v3.5.1 manifests/crds/application-crd.yaml (spec.source.{repoURL, chart,
targetRevision, path, directory, helm.releaseName, helm.valuesObject}, spec.destination, spec.syncPolicy).
"""

from __future__ import annotations

from typing import Any

API_VERSION = "argoproj.io/v1alpha1"
KIND = "Application"
ARGOCD_NAMESPACE = "argocd"  # components/kubernetes/namespaces.py ARGOCD; Applications live in Argo CD's namespace
PROJECT = "default"  # the AppProject Argo CD creates at install
IN_CLUSTER = "https://kubernetes.default.svc"  # the cluster Argo CD runs in (argo-cd docs: declarative-setup.md)
# argo-cd v3.5.1 docs/user-guide/sync-waves.md: lower waves sync (and must be healthy) before higher ones.
WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"
# Deleting an Application also deletes what it deployed (argo-cd v3.5.1 docs/user-guide/app_deletion.md).
FINALIZER = "resources-finalizer.argocd.argoproj.io"
OCI_PREFIX = "oci://"


def helm_source(chart: str, version: str, repo: str | None, release_name: str,
                values: dict[str, Any]) -> dict[str, Any]:
    """A Helm chart source. An `oci://registry/path/chart` reference becomes repoURL `registry/path` and chart
    `chart`: Argo CD's Helm OCI form has no oci:// (argo-cd v3.5.1 docs/user-guide/helm.md)."""
    if chart.startswith(OCI_PREFIX):
        repo_url, _, name = chart.removeprefix(OCI_PREFIX).rpartition("/")
    else:
        repo_url, name = repo or "", chart
    return {"repoURL": repo_url, "chart": name, "targetRevision": version,
            "helm": {"releaseName": release_name, "valuesObject": values}}


def git_source(repo_url: str, revision: str, path: str, exclude: str | None = None) -> dict[str, Any]:
    """A directory of plain manifests in Git (recursion off: one folder, one file per object)."""
    source: dict[str, Any] = {"repoURL": repo_url, "targetRevision": revision, "path": path}
    if exclude:
        source["directory"] = {"exclude": exclude}
    return source


def application(name: str, source: dict[str, Any], namespace: str | None, wave: int,
                create_namespace: bool) -> dict[str, Any]:
    """An Application syncing `source` into `namespace`, pruning and self-healing, at sync wave `wave`."""
    sync: dict[str, Any] = {"automated": {"prune": True, "selfHeal": True}}
    if create_namespace:
        sync["syncOptions"] = ["CreateNamespace=true"]
    destination = {"server": IN_CLUSTER, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": ARGOCD_NAMESPACE,
                         "annotations": {WAVE_ANNOTATION: str(wave)}, "finalizers": [FINALIZER]},
            "spec": {"project": PROJECT, "source": source, "destination": destination, "syncPolicy": sync}}
