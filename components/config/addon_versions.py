"""The EKS add-on versions the cluster installs, per Kubernetes minor: one table, without Pulumi, so the config
validators can refuse a Kubernetes version that has no pinned add-ons before anything is built."""

from __future__ import annotations

# Kubernetes 1.33's Amazon EKS add-on versions, as the EKS user guide's tables list them (when 1.34 was the
# newest EKS version): docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html ("Amazon VPC CNI
# versions"), .../managing-kube-proxy.html ("kube-proxy versions"), .../managing-coredns.html ("CoreDNS
# versions"). Newer builds exist; `aws eks describe-addon-versions --kubernetes-version 1.33` lists them.
ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.33": {
        "vpc-cni": "v1.20.4-eksbuild.1",
        "kube-proxy": "v1.33.5-eksbuild.2",
        "coredns": "v1.12.4-eksbuild.1",
    },
}


def addon_version(kubernetes_version: str, addon: str) -> str:
    """The pinned version of `addon` for this Kubernetes minor; a version the table lacks is a KeyError that
    names both, rather than an unpinned add-on."""
    try:
        return ADDON_VERSIONS[kubernetes_version][addon]
    except KeyError:
        raise KeyError(f"no pinned {addon} add-on version for Kubernetes {kubernetes_version}: add one to "
                       "components/config/addon_versions.py ADDON_VERSIONS from the EKS user guide's table") from None
