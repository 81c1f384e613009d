"""cert-manager and Slinky's slurm-operator (CRDs chart + operator chart), installed in dependency order, each into
its own namespace (components/kubernetes/namespaces.py)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.kubernetes.charts import CERT_MANAGER, SLURM_OPERATOR, SLURM_OPERATOR_CRDS, SYSTEM_AFFINITY, release
from components.kubernetes.namespaces import RESTRICTED_CONTAINER, RESTRICTED_POD, Namespaces
from components.slinky.host_access import OPERATOR_SERVICE_ACCOUNT

# The chart leaves both security contexts empty (slurm-operator v1.2.1 helm/slurm-operator/values.yaml
# operator/webhook podSecurityContext and securityContext); its images run as 65532 (Dockerfile USER
# 65532:65532), so the restricted level's settings cost nothing.
RESTRICTED = {"podSecurityContext": RESTRICTED_POD, "securityContext": RESTRICTED_CONTAINER}


class SlinkyOperator(pulumi.ComponentResource):
    """`ready` is the operator Release: Pulumi waits for its deployments, webhook included, so Slinky
    objects that depend on it are admitted by a running webhook whose certificate cert-manager issued."""

    ready: k8s.helm.v3.Release

    def __init__(self, name: str, namespaces: Namespaces, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:SlinkyOperator", name, None, opts)
        provider = namespaces.provider
        on_system = {"nodeSelector": SYSTEM_NODE_SELECTOR}
        cert_manager_ns = namespaces.create(f"namespace-{CERT_MANAGER.namespace}", CERT_MANAGER.namespace, self)
        slinky_ns = namespaces.create(f"namespace-{SLURM_OPERATOR.namespace}", SLURM_OPERATOR.namespace, self)
        cert_manager = release("cert-manager", CERT_MANAGER, {
            "crds": {"enabled": True},
            **on_system,
            "webhook": on_system, "cainjector": on_system, "startupapicheck": on_system,
        }, provider, self, cert_manager_ns)
        crds = release("slurm-operator-crds", SLURM_OPERATOR_CRDS, {}, provider, self, slinky_ns)
        # The operator chart issues its webhook certificate through cert-manager: it must be serving first.
        self.ready = release("slurm-operator", SLURM_OPERATOR, {
            "crds": {"enabled": False},
            "certManager": {"enabled": True},
            # Named, not the release's fullname: components/slinky/host_access.py admits slurmd pods by it.
            "operator": {"affinity": SYSTEM_AFFINITY, "serviceAccount": {"name": OPERATOR_SERVICE_ACCOUNT},
                         **RESTRICTED},
            "webhook": {"affinity": SYSTEM_AFFINITY, **RESTRICTED},
        }, provider, self, slinky_ns, depends_on=[cert_manager, crds])
        self.register_outputs({"operatorVersion": SLURM_OPERATOR.version})
