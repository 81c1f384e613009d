"""Every object the Slurm side puts in the plan is one the API server accepts: CRs against the real CRDs
(strict: unknown fields and CEL rules), built-in kinds against Kubernetes' schemas, and the pod and Service
templates Slinky keeps opaque validated as the Pods and Services they become."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.plan_model import Plan, known
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import from_directory, objects, plan_of, trainium_only, variant

GROUPS = ("slinky.slurm.net/", "keda.sh/", "cert-manager.io/", "k8s.mariadb.com/", "monitoring.coreos.com/")
CONTAINERS = {"NodeSet": "slurmd", "LoginSet": "login", "Controller": "slurmctld", "Accounting": "slurmdbd",
              "RestApi": "slurmrestd"}


@pytest.fixture(scope="module")
def registry(crd_registry: SchemaRegistry) -> SchemaRegistry:
    return crd_registry


@pytest.fixture(scope="module", params=["dev", "prod", "trainium-only", "directory"])
def plan(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Plan:
    if request.param == "trainium-only":
        return plan_of(variant("prod", trainium_only), tmp_path_factory.mktemp("trn"))
    if request.param == "directory":  # people from LDAP: the LDAP CA mounted beside sssd.conf
        return plan_of(variant("dev", from_directory(caCertificate="k8s:ldap/ca.pem")), tmp_path_factory.mktemp("ldap"))
    return shipped_plan(request.param)


def _ours(doc: dict[str, Any]) -> bool:
    return doc["apiVersion"].startswith(GROUPS) or doc["metadata"].get("namespace") == "slurm" or \
        doc["kind"] in ("StorageClass", "Namespace")


def test_every_slurm_side_object_is_accepted(plan: Plan, registry: SchemaRegistry) -> None:
    docs = [d for d in plan.manifests() if _ours(d)]
    kinds = {d["kind"] for d in docs}
    assert {"Controller", "Accounting", "RestApi", "LoginSet", "NodeSet", "ScaledObject", "Secret"} <= kinds
    problems = [str(p) for doc in docs for p in validate_manifest(known(doc), registry)]
    assert problems == []


def test_the_validator_would_catch_a_misplaced_field(plan: Plan, registry: SchemaRegistry) -> None:
    nodeset = next(iter(objects(plan, "NodeSet").values()))
    wrong = {**nodeset, "spec": {**nodeset["spec"], "volumes": nodeset["spec"]["template"]["spec"]["volumes"]}}
    assert any("volumes" in p.path for p in validate_manifest(wrong, registry))


def _as_pod(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The daemon's container, the template's init containers and, where Slinky v1.2.1 adds it (Controller,
    NodeSet), its `logfile` sidecar (internal/builder/common/common.go LogfileContainer: a restartable init
    container with no image of its own)."""
    spec = doc["spec"]
    container = {"name": CONTAINERS[kind], **spec[CONTAINERS[kind]]}
    pod_spec = {**spec["template"]["spec"], "containers": [container]}
    if kind in ("Controller", "NodeSet"):
        pod_spec["initContainers"] = [{"name": "logfile", "restartPolicy": "Always", **spec.get("logfile", {})},
                                      *pod_spec.get("initContainers", [])]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": doc["metadata"]["name"]}, "spec": pod_spec}


@pytest.mark.parametrize("kind", sorted(CONTAINERS))
def test_pod_templates_are_valid_pods_and_mount_only_their_volumes(plan: Plan, registry: SchemaRegistry,
                                                                   kind: str) -> None:
    for doc in objects(plan, kind).values():
        pod = _as_pod(kind, doc)
        assert [str(p) for p in validate_manifest(pod, registry)] == []
        # A Pod's containers need an image (a template's may leave it to the controller: the schema allows both).
        assert all(c.get("image") for c in [*pod["spec"]["containers"], *pod["spec"].get("initContainers", [])])
        volumes = {v["name"] for v in pod["spec"].get("volumes", [])}
        for container in [*pod["spec"]["containers"], *pod["spec"].get("initContainers", [])]:
            mounts = {m["name"] for m in container.get("volumeMounts", [])}
            assert mounts <= volumes, f"{kind}/{doc['metadata']['name']} mounts undeclared volumes {mounts - volumes}"


def test_login_service_template_is_a_valid_service(plan: Plan, registry: SchemaRegistry) -> None:
    (login,) = objects(plan, "LoginSet").values()
    service = login["spec"]["service"]
    doc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "login", **service["metadata"]},
           "spec": {**service["spec"], "ports": [{"port": service["port"], "name": "ssh"}]}}
    assert [str(p) for p in validate_manifest(doc, registry)] == []
