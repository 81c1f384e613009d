"""cert-manager and Slinky's slurm-operator (CRDs chart + operator chart), installed in dependency order."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.cluster import SYSTEM_NODE_SELECTOR
from components.slinky.charts import CERT_MANAGER, SLURM_OPERATOR, SLURM_OPERATOR_CRDS, SYSTEM_AFFINITY, release


class SlinkyOperator(pulumi.ComponentResource):
    """`ready` is the operator Release: Pulumi waits for its deployments, webhook included, so Slinky
    objects that depend on it are admitted by a running webhook whose certificate cert-manager issued."""

    ready: k8s.helm.v3.Release

    def __init__(self, name: str, provider: k8s.Provider, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:SlinkyOperator", name, None, opts)
        on_system = {"nodeSelector": SYSTEM_NODE_SELECTOR}
        cert_manager = release("cert-manager", CERT_MANAGER, {
            "crds": {"enabled": True},
            **on_system,
            "webhook": on_system, "cainjector": on_system, "startupapicheck": on_system,
        }, provider, self)
        crds = release("slurm-operator-crds", SLURM_OPERATOR_CRDS, {}, provider, self)
        # The operator chart issues its webhook certificate through cert-manager: it must be serving first.
        self.ready = release("slurm-operator", SLURM_OPERATOR, {
            "crds": {"enabled": False},
            "certManager": {"enabled": True},
            "operator": {"affinity": SYSTEM_AFFINITY},
            "webhook": {"affinity": SYSTEM_AFFINITY},
        }, provider, self, depends_on=[cert_manager, crds])
        self.register_outputs({"operatorVersion": SLURM_OPERATOR.version})
