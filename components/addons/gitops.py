"""Gitops mode (`gitops:`): Pulumi installs Argo CD (the argo-helm `argo-cd` chart) into its own segmented
namespace, and the root Application that syncs the exported tree's apps/ folder from Git. The charts
themselves are then Argo CD's (components/kubernetes/handover.py)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.addons.gitops_apps import application, git_source
from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.config.gitops import GitOps
from components.kubernetes.charts import Chart, release
from components.kubernetes.namespaces import ARGOCD, Namespaces

# argoproj/argo-helm charts/argo-cd/Chart.yaml: version 10.1.1 ships appVersion v3.4.4, the newest chart in the
# snapshot read offline (argo-helm af0a9310, 2026-07-02). The chart release shipping v3.5.1 (the CRDs in
# ../shared/crds/argocd) could not be read offline: bump this pin when it is confirmed.
ARGO_CD = Chart("argo-cd", "10.1.1", ARGOCD, "https://argoproj.github.io/argo-helm")
ROOT_APP = "slurm-eks-root"
# The manifests Applications of the export (scripts/offline/gitops_export.py): Pulumi applies those objects in
# gitops mode, so the root Application leaves them out.
MANIFEST_APPS = "manifests-*"

# argo-helm argo-cd 10.1.1 values.yaml: dex.enabled (SSO; off: admin and local users only), notifications.enabled
# (off: nothing sends), global.nodeSelector (every component).
ARGO_CD_VALUES = {"global": {"nodeSelector": SYSTEM_NODE_SELECTOR},
                  "dex": {"enabled": False}, "notifications": {"enabled": False}}


def root_application(gitops: GitOps) -> dict:
    """The app-of-apps root: every Application under `<path>/apps`, except the manifests ones."""
    source = git_source(gitops.repo_url, gitops.target_revision, gitops.apps_path, exclude=MANIFEST_APPS)
    return application(ROOT_APP, source, ARGOCD, 0, create_namespace=False)


class ArgoCd(pulumi.ComponentResource):
    root: pulumi.Resource  # what every handed-over chart's dependants wait for

    def __init__(self, name: str, gitops: GitOps, namespaces: Namespaces,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:ArgoCd", name, None, opts)
        ready = namespaces.create(f"{name}-namespace", ARGOCD, self)
        install = release("argocd", ARGO_CD, ARGO_CD_VALUES, namespaces.provider, self, ready)
        doc = root_application(gitops)
        self.root = k8s.apiextensions.CustomResource(
            f"{name}-root", api_version=doc["apiVersion"], kind=doc["kind"], metadata=doc["metadata"],
            spec=doc["spec"], opts=pulumi.ResourceOptions(parent=self, provider=namespaces.provider,
                                                          depends_on=[install]))
        self.register_outputs({})
