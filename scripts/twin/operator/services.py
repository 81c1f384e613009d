"""The Services the operator creates: slurmctld's, slurmdbd's, slurmrestd's, the login Service and the
cluster-wide headless worker Service.

Ports of slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_service.go
(BuildControllerService), accountingbuilder/accounting_service.go (BuildAccountingService),
restapibuilder/restapi_service.go (BuildRestapiService), loginbuilder/login_service.go (BuildLoginService),
workerbuilder/worker_service.go (BuildClusterWorkerService) and common/service.go (BuildService: selector merged
over spec.service.spec's, externalIPs dropped, headless = clusterIP None + publishNotReadyAddresses).
Each port targets the container port of the same name (slurmctld, slurmdbd, slurmrestd, login, slurmd); the
service port is spec.service.port, else the daemon's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.common import default_port, layered
from scripts.twin.operator.labels import (
    accounting_labels,
    accounting_selector_labels,
    controller_labels,
    controller_selector_labels,
    login_labels,
    login_selector_labels,
    restapi_labels,
    restapi_selector_labels,
    worker_service_selector,
)
from scripts.twin.operator.model import ServicePlan, service_from_dict
from scripts.twin.operator.names import (
    accounting_service_name,
    controller_service_name,
    loginset_service_name,
    namespace_of,
    nodeset_controller_name,
    restapi_service_name,
    spec_of,
    worker_service_name,
)


def _service(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    service: Mapping[str, Any],
    selector: Mapping[str, str],
    port_name: str,
    default: int,
    headless: bool = False,
) -> ServicePlan:
    """slurm-operator v1.2.1 internal/builder/common/service.go BuildService with the builders' one port."""
    spec = dict(service.get("spec") or {})
    spec.pop("externalIPs", None)  # Prevent MitM via CVE-2020-8554
    port: dict[str, Any] = {"name": port_name, "protocol": "TCP",
                            "port": default_port(service.get("port"), default), "targetPort": port_name}
    if service.get("nodePort"):
        port["nodePort"] = int(service["nodePort"])
    spec["ports"] = [*(spec.get("ports") or []), port]
    spec["selector"] = layered(spec.get("selector"), selector)
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    return service_from_dict({"metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                                           "annotations": dict(annotations)}, "spec": spec})


def _svc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return spec_of(obj).get("service") or {}


def controller_service(controller: Mapping[str, Any]) -> ServicePlan:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_service.go BuildControllerService:
    `<name>-controller`, port slurmctld 6817, selecting app.kubernetes.io/name=slurmctld,instance=<name>. Not
    created for an external controller."""
    meta = controller.get("metadata") or {}
    svc = _svc(controller)
    svc_meta = svc.get("metadata") or {}
    return _service(name=controller_service_name(controller), namespace=namespace_of(controller),
                    labels=layered(meta.get("labels"), svc_meta.get("labels"), controller_labels(controller)),
                    annotations=layered(meta.get("annotations"), svc_meta.get("annotations")), service=svc,
                    selector=controller_selector_labels(controller), port_name=consts.CONTROLLER_APP,
                    default=consts.SLURMCTLD_PORT)


def accounting_service(accounting: Mapping[str, Any]) -> ServicePlan:
    """slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_service.go BuildAccountingService:
    `<name>-accounting` (slurm.conf's AccountingStorageHost), port slurmdbd 6819."""
    meta = accounting.get("metadata") or {}
    svc = _svc(accounting)
    svc_meta = svc.get("metadata") or {}
    return _service(name=accounting_service_name(accounting), namespace=namespace_of(accounting),
                    labels=layered(meta.get("labels"), svc_meta.get("labels"), accounting_labels(accounting)),
                    annotations=layered(meta.get("annotations"), svc_meta.get("annotations")), service=svc,
                    selector=accounting_selector_labels(accounting), port_name=consts.ACCOUNTING_APP,
                    default=consts.SLURMDBD_PORT)


def restapi_service(restapi: Mapping[str, Any]) -> ServicePlan:
    """slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_service.go BuildRestapiService:
    `<name>-restapi`, port slurmrestd 6820 (metadata from spec.service.metadata only, plus the labels)."""
    svc = _svc(restapi)
    svc_meta = svc.get("metadata") or {}
    return _service(name=restapi_service_name(restapi), namespace=namespace_of(restapi),
                    labels=layered(svc_meta.get("labels"), restapi_labels(restapi)),
                    annotations=dict(svc_meta.get("annotations") or {}), service=svc,
                    selector=restapi_selector_labels(restapi), port_name=consts.RESTAPI_APP,
                    default=consts.SLURMRESTD_PORT)


def login_service(loginset: Mapping[str, Any]) -> ServicePlan:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_service.go BuildLoginService: named like the
    LoginSet itself, port login (spec.service.port, default 22) to the container's "login" port, type and
    the rest from spec.service.spec."""
    meta = loginset.get("metadata") or {}
    svc = _svc(loginset)
    svc_meta = svc.get("metadata") or {}
    return _service(name=loginset_service_name(loginset), namespace=namespace_of(loginset),
                    labels=layered(meta.get("labels"), svc_meta.get("labels"), login_labels(loginset)),
                    annotations=layered(meta.get("annotations"), svc_meta.get("annotations")), service=svc,
                    selector=login_selector_labels(loginset), port_name=consts.LOGIN_APP, default=consts.LOGIN_PORT)


def worker_service(nodeset: Mapping[str, Any]) -> ServicePlan:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_service.go BuildClusterWorkerService: one
    headless `slurm-workers-<controller>` for every NodeSet of the cluster, port slurmd 6818, selecting
    app.kubernetes.io/name=slurmd and slinky.slurm.net/cluster=<controller> (NodeSet pods' subdomain)."""
    controller_name = nodeset_controller_name(nodeset)
    return _service(name=worker_service_name(controller_name), namespace=namespace_of(nodeset), labels={},
                    annotations={}, service={}, selector=worker_service_selector(controller_name),
                    port_name=consts.WORKER_APP, default=consts.SLURMD_PORT, headless=True)
