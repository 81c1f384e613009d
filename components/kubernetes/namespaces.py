"""Every namespace the program installs into, created as a Namespace with Pod Security Admission labels.

Pod Security Admission (kubernetes.io/docs/concepts/security/pod-security-admission) reads
`pod-security.kubernetes.io/<mode>` and `<mode>-version` labels: `enforce` rejects pods that break the level,
`warn` tells whoever creates them, `audit` annotates the audit log. Each level here is the strictest that every
pod of the namespace meets at the pinned chart versions (the reason says why); versions are pinned to the
cluster's minor, so a control plane upgrade does not change what is admitted.

kube-system (Karpenter, the FSx CSI driver, the device plugins) is not labelled here: EKS creates it and runs
its own privileged DaemonSets there (aws-node, kube-proxy); a namespace without labels gets EKS's defaults,
`privileged` in all three modes (aws.amazon.com/blogs/containers/implementing-pod-security-standards-in-amazon-eks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import pulumi
import pulumi_kubernetes as k8s

from components.names import ML_NAMESPACE, MLFLOW_NAMESPACE, SLURM_NAMESPACE

Level = Literal["privileged", "baseline", "restricted"]
PREFIX = "pod-security.kubernetes.io"
# The Pod Security Standards as of the cluster's Kubernetes version (components/aws/eks.py deploys 1.33).
VERSION = "v1.33"
# The label the API server puts on every namespace (kubernetes.io/docs/reference/labels-annotations-taints/
# #kubernetes-io-metadata-name): what a namespaceSelector can match one namespace by.
NAME_LABEL = "kubernetes.io/metadata.name"

CERT_MANAGER = "cert-manager"
SLINKY = "slinky"
KEDA = "keda"
MONITORING = "monitoring"
MARIADB_OPERATOR = "mariadb-operator"
KUBERAY = "kuberay"
MPI_OPERATOR = "mpi-operator"  # the upstream manifest's namespace (its --lock-namespace)
VOLCANO = "volcano-system"  # the namespace upstream's README installs the chart into
JUPYTERHUB = "jupyterhub"
ARGOCD = "argocd"  # with `gitops:` only (components/addons/gitops.py)


@dataclass(frozen=True)
class PodSecurity:
    enforce: Level
    warn: Level
    audit: Level
    reason: str  # why `enforce` is no stricter

    def labels(self) -> dict[str, str]:
        return {f"{PREFIX}/{mode}{suffix}": value for mode in ("enforce", "warn", "audit")
                for suffix, value in (("", getattr(self, mode)), ("-version", VERSION))}


def _restricted(reason: str) -> PodSecurity:
    return PodSecurity("restricted", "restricted", "restricted", reason)


POD_SECURITY: dict[str, PodSecurity] = {
    SLURM_NAMESPACE: PodSecurity(
        "privileged", "baseline", "restricted",
        "slurmd runs privileged with BPF, NET_ADMIN, SYS_ADMIN and SYS_NICE (slurm-operator v1.2.1 internal/"
        "builder/workerbuilder/worker_app.go slurmdContainer), and a NodeSet's controllerRef has only a name, so "
        "its pods live in the Controller's namespace. components/slinky/host_access.py admits host access there "
        "for the operator's slurmd pods only; warn shows any other pod above baseline, audit logs the gap to "
        "restricted (login and slurmdbd/slurmctld set no seccomp profile or capability drop)."),
    MONITORING: PodSecurity(
        "privileged", "baseline", "restricted",
        "kube-prometheus-stack 88.2.0 installs prometheus-node-exporter 4.56.1, whose DaemonSet uses hostNetwork, "
        "hostPID and a hostPath of / (charts/prometheus-node-exporter/values.yaml hostNetwork, hostPID, "
        "hostRootFsMount), all forbidden at baseline."),
    CERT_MANAGER: _restricted(
        "cert-manager v1.21.1 deploy/charts/cert-manager/values.yaml: controller, webhook, cainjector and "
        "startupapicheck run with runAsNonRoot, seccomp RuntimeDefault, allowPrivilegeEscalation false and "
        "capabilities drop ALL by default."),
    KEDA: _restricted(
        "kedacore/charts v2.20.2 keda/values.yaml securityContext and podSecurityContext: operator, metrics server "
        "and webhooks drop ALL, no privilege escalation, seccomp RuntimeDefault, runAsNonRoot."),
    SLINKY: _restricted(
        "slurm-operator 1.2.1's operator and webhook images run as 65532 (Dockerfile USER 65532:65532) and mount "
        "only Secrets; components/slinky/operator.py sets the restricted security contexts the chart leaves empty."),
    MARIADB_OPERATOR: _restricted(
        "mariadb-operator 26.6.0's image runs as 65532 (Dockerfile USER 65532:65532) and its pods mount only "
        "Secrets; components/slinky/accounting_db.py sets the restricted security contexts the chart leaves empty."),
    KUBERAY: _restricted(
        "ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/values.yaml securityContext: drop ALL, no privilege "
        "escalation, runAsNonRoot, seccomp RuntimeDefault; the image runs as 65532 (ray-operator/Dockerfile)."),
    MPI_OPERATOR: _restricted(
        "kubeflow/mpi-operator v0.8.0 deploy/v2beta1/mpi-operator.yaml sets no security context and its image is "
        "distroless/base (root); components/addons/k8s_operators.py runs the API-only controller as "
        "distroless's nonroot user 65532 with the restricted contexts."),
    VOLCANO: PodSecurity(
        "baseline", "restricted", "restricted",
        "volcano v1.15.1 installer/helm/chart/volcano/values.yaml custom.default_csc adds DAC_OVERRIDE to the "
        "admission, admission-init, controller and scheduler containers (baseline allows it, restricted allows "
        "only NET_BIND_SERVICE); upstream's choice is kept rather than guessed unneeded."),
    ML_NAMESPACE: PodSecurity(
        "baseline", "restricted", "restricted",
        "MPIJob workers run sshd for mpirun (kubeflow/mpi-operator v0.8.0 launches ranks over SSH), as root in "
        "nccl-tests images built from AWS's recipe; EFA and GPUs come from device plugins and need no privilege, "
        "so baseline holds. RayCluster and Volcano pods `slurm-eks k8s render` writes meet restricted."),
    JUPYTERHUB: _restricted(
        "zero-to-jupyterhub 4.4.0 jupyterhub/values.yaml: hub (runAsNonRoot, seccomp RuntimeDefault, runAsUser 1000, "
        "drop ALL, no privilege escalation) and proxy.chp (the same, as 65534) meet restricted; components/"
        "jupyterhub.py turns off singleuser.cloudMetadata.blockWithIptables (a privileged iptables init container: "
        "NetworkPolicies and hop limit 1 keep IMDS away) and gives user pods KubeSpawner's restricted contexts."),
    MLFLOW_NAMESPACE: _restricted(
        "components/addons/mlflow.py: the tracking server (ghcr.io/mlflow/mlflow, which sets no USER: it runs as 1000 "
        "here, as mlflow/mlflow charts/values.yaml podSecurityContext does), its CA fetch and the RDS database-user "
        "Job run non-root with seccomp RuntimeDefault, no privilege escalation and every capability dropped."),
    ARGOCD: _restricted(
        "argoproj/argo-helm argo-cd 10.1.1 charts/argo-cd/values.yaml: every component's containerSecurityContext "
        "(controller, server, repoServer and its copyutil init container, applicationSet, redis, redisSecretInit) "
        "sets runAsNonRoot, seccomp RuntimeDefault, no privilege escalation and drops ALL; dex and notifications "
        "are off (components/addons/gitops.py)."),
}

# Chart values for a pod whose image already runs as a non-root user: what the restricted level asks for
# (runAsNonRoot, seccomp RuntimeDefault, no privilege escalation, every capability dropped).
RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def namespace(resource_name: str, name: str, provider: k8s.Provider, parent: pulumi.Resource) -> k8s.core.v1.Namespace:
    """The Namespace `name` with its Pod Security labels; a name missing from POD_SECURITY is a KeyError, so no
    namespace is created without a deliberate level."""
    return k8s.core.v1.Namespace(resource_name, metadata={"name": name, "labels": POD_SECURITY[name].labels()},
                                 opts=pulumi.ResourceOptions(parent=parent, provider=provider))


class Namespaces(Protocol):
    """What a component that installs into its own namespace is given: the Kubernetes provider, and `create`, which
    makes the Namespace with its Pod Security labels and its NetworkPolicies (components/segmentation/
    segmented_namespaces.py, the one implementation: the policies know every component's ports, so they sit above
    the components that use this)."""

    @property
    def provider(self) -> k8s.Provider: ...

    def create(self, resource_name: str, name: str, parent: pulumi.Resource) -> list[pulumi.Resource]:
        """The Namespace `name` (first) and the NetworkPolicies that live in it: what its workloads depend on."""
        ...
