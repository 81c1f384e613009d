"""The labels the operator puts on its objects and selects its pods by.

Port of slurm-operator v1.2.1 internal/builder/labels/labels.go (Builder.With*Labels, With*SelectorLabels,
WithCluster, WithPodProtect). Selector labels are `app.kubernetes.io/name` (slurmctld, slurmd, login,
slurmrestd, slurmdbd) and `app.kubernetes.io/instance` (the object's name); the full labels add
`app.kubernetes.io/component`, and a NodeSet's add `slinky.slurm.net/cluster` (its controllerRef's name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.names import name_of, nodeset_controller_name


def _selector(app: str, obj: Mapping[str, Any]) -> dict[str, str]:
    return {consts.APP_LABEL: app, consts.INSTANCE_LABEL: name_of(obj)}


def controller_selector_labels(controller: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithControllerSelectorLabels."""
    return _selector(consts.CONTROLLER_APP, controller)


def controller_labels(controller: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithControllerLabels."""
    return {**controller_selector_labels(controller), consts.COMPONENT_LABEL: consts.CONTROLLER_COMP}


def restapi_selector_labels(restapi: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithRestapiSelectorLabels."""
    return _selector(consts.RESTAPI_APP, restapi)


def restapi_labels(restapi: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithRestapiLabels."""
    return {**restapi_selector_labels(restapi), consts.COMPONENT_LABEL: consts.RESTAPI_COMP}


def accounting_selector_labels(accounting: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithAccountingSelectorLabels."""
    return _selector(consts.ACCOUNTING_APP, accounting)


def accounting_labels(accounting: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithAccountingLabels."""
    return {**accounting_selector_labels(accounting), consts.COMPONENT_LABEL: consts.ACCOUNTING_COMP}


def worker_selector_labels(nodeset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithWorkerSelectorLabels."""
    return _selector(consts.WORKER_APP, nodeset)


def worker_labels(nodeset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithWorkerLabels (adds the cluster label)."""
    return {**worker_selector_labels(nodeset), consts.COMPONENT_LABEL: consts.WORKER_COMP,
            consts.CLUSTER_LABEL: nodeset_controller_name(nodeset)}


def login_selector_labels(loginset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithLoginSelectorLabels."""
    return _selector(consts.LOGIN_APP, loginset)


def login_labels(loginset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithLoginLabels."""
    return {**login_selector_labels(loginset), consts.COMPONENT_LABEL: consts.LOGIN_COMP}


def worker_service_selector(controller_name: str) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_service.go BuildClusterWorkerService:
    every slurmd pod of the cluster, `WithApp(slurmd).WithCluster(<controller>)`."""
    return {consts.APP_LABEL: consts.WORKER_APP, consts.CLUSTER_LABEL: controller_name}


def pod_protect_labels() -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/labels/labels.go WithPodProtect (the PDB's selector; the NodeSet
    controller sets it on pods running jobs when workloadDisruptionProtection is on)."""
    return {consts.LABEL_NODESET_POD_PROTECT: "true"}
