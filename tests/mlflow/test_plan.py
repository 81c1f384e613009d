"""The tracking server as the program plans it under Pulumi's mocks: prod (its database on the accounting RDS), a dev
variant (SQLite on a volume: dev's accounting is in-cluster) and a prod variant on a Kubernetes pool. Every object is
one the API server accepts (Kubernetes' own schemas, strictly), every pod meets the namespace's `restricted` level,
nothing is reachable from outside the cluster, and the deploy check passes on each plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.addons.mlflow import (
    ALLOWED_HOSTS,
    CA_FILE,
    DATA_CLAIM,
    DB_PASSWORD,
    DB_USER_JOB,
    IMAGE,
    MIGRATE,
    MLFLOW_VERSION,
    SQLITE_URI,
    artifact_policy,
)
from components.compute.nodepools import POOL_LABEL
from components.config.cluster import ClusterConfig
from components.kubernetes.namespaces import POD_SECURITY
from components.names import MLFLOW_HOST, MLFLOW_NAMESPACE, MLFLOW_PORT, MLFLOW_SERVICE, MLFLOW_TRACKING_URI
from scripts.checks.deploy import check_plan
from scripts.checks.pod_security import pod_templates
from scripts.checks.pod_security_standards import evaluate
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.plan_model import SECRET, Plan, PlannedResource, known
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, plan_of, variant

pytestmark = pytest.mark.slow  # whole plans: `make test-fast` leaves it out

ROLE, ROLE_POLICY = "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"
DEV_ARTIFACTS = "s3://dev-ml-artifacts/mlflow"


def in_cluster(raw: dict[str, Any]) -> None:
    raw.setdefault("addons", {})["mlflow"] = {"artifacts": DEV_ARTIFACTS, "database": "in-cluster"}


def on_pool(raw: dict[str, Any]) -> None:
    raw["addons"]["mlflow"]["pool"] = "ml-a10g"


@pytest.fixture(scope="module", params=["prod", "dev-in-cluster", "prod-on-pool"])
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[str, Plan, ClusterConfig]:
    if request.param == "prod":
        return "prod", shipped_plan("prod"), config_of(variant("prod", lambda raw: None))
    raw = variant("dev", in_cluster) if request.param == "dev-in-cluster" else variant("prod", on_pool)
    return request.param, plan_of(raw, tmp_path_factory.mktemp(request.param)), config_of(raw)


def objects(plan: Plan) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in plan.manifests()
            if d["metadata"].get("namespace") == MLFLOW_NAMESPACE
            or (d["kind"] == "Namespace" and d["metadata"]["name"] == MLFLOW_NAMESPACE)}


def server(plan: Plan) -> dict[str, Any]:
    return objects(plan)[("Deployment", MLFLOW_SERVICE)]


def container(plan: Plan) -> dict[str, Any]:
    (found,) = server(plan)["spec"]["template"]["spec"]["containers"]
    return found


def env(plan: Plan) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(plan)["env"]}


def manifest_resource(plan: Plan, kind: str, name: str) -> PlannedResource:
    (found,) = [r for r in plan.resources if r.is_manifest and r.inputs["kind"] == kind
                and r.inputs["metadata"]["name"] == name and r.inputs["metadata"].get("namespace") == MLFLOW_NAMESPACE]
    return found


def irsa_role(plan: Plan, service_account: str) -> PlannedResource:
    subject = f"system:serviceaccount:{MLFLOW_NAMESPACE}:{service_account}"
    (found,) = [r for r in plan.of_type(ROLE) if subject in [
        v for s in json.loads(r.inputs["assumeRolePolicy"])["Statement"]
        for k, v in s.get("Condition", {}).get("StringEquals", {}).items() if k.endswith(":sub")]]
    return found


def role_policies(plan: Plan, role: PlannedResource) -> list[dict[str, Any]]:
    return [json.loads(r.inputs["policy"]) for r in plan.of_type(ROLE_POLICY) if r.inputs["role"] == role.name]


def test_every_object_is_one_the_api_server_accepts(stack: tuple[str, Plan, ClusterConfig],
                                                    crd_registry: SchemaRegistry) -> None:
    _, plan, _ = stack
    docs = objects(plan)
    assert {"Namespace", "Deployment", "Service", "ServiceAccount", "NetworkPolicy"} <= {k for k, _ in docs}
    assert [str(p) for d in docs.values() for p in validate_manifest(known(d), crd_registry)] == []


def test_the_validator_would_catch_a_misplaced_field(crd_registry: SchemaRegistry) -> None:
    deployment = server(shipped_plan("prod"))
    wrong = {**deployment, "spec": {**deployment["spec"], "serviceAccountName": "mlflow"}}
    assert any("serviceAccountName" in p.path for p in validate_manifest(known(wrong), crd_registry))


def test_the_namespace_is_restricted_and_every_pod_meets_it(stack: tuple[str, Plan, ClusterConfig]) -> None:
    _, plan, _ = stack
    assert POD_SECURITY[MLFLOW_NAMESPACE].enforce == "restricted"
    pods = [p for p in pod_templates(plan) if p.namespace == MLFLOW_NAMESPACE]
    assert len(pods) == (2 if any(k == "Job" for k, _ in objects(plan)) else 1)
    for pod in pods:
        assert evaluate("restricted", pod.metadata, pod.spec) == [], pod.urn
        assert pod.spec["securityContext"]["runAsNonRoot"] is True


def test_reachable_inside_the_cluster_only(stack: tuple[str, Plan, ClusterConfig]) -> None:
    _, plan, _ = stack
    docs = objects(plan)
    services = [d for (kind, _), d in docs.items() if kind == "Service"]
    assert [s["spec"]["type"] for s in services] == ["ClusterIP"]
    assert services[0]["spec"]["ports"] == [{"name": "http", "port": MLFLOW_PORT, "targetPort": "http",
                                             "protocol": "TCP"}]
    assert not [k for k, _ in docs if k in ("Ingress", "Gateway", "HTTPRoute")]
    assert all(not p.get("hostPort") for p in container(plan)["ports"])
    assert plan.outputs["mlflowTrackingUri"] == MLFLOW_TRACKING_URI == f"http://{MLFLOW_HOST}:{MLFLOW_PORT}"
    assert f"{MLFLOW_SERVICE}.{MLFLOW_NAMESPACE}.svc.cluster.local" == MLFLOW_HOST


def test_the_server_runs_the_pinned_full_image_with_the_proxy_and_host_check(
        stack: tuple[str, Plan, ClusterConfig]) -> None:
    _, plan, config = stack
    c = container(plan)
    assert c["image"] == IMAGE == f"ghcr.io/mlflow/mlflow:v{MLFLOW_VERSION}-full"
    command = c["command"]
    assert command[:2] == ["mlflow", "server"]
    options = dict(zip(command[2::2], command[3::2], strict=False))
    assert "--serve-artifacts" in command and "--no-serve-artifacts" not in command
    assert command[command.index("--artifacts-destination") + 1] == config.addons.mlflow.artifacts
    assert options["--host"] == "0.0.0.0" and options["--port"] == str(MLFLOW_PORT)
    # clients name the server by the tracking URI's host: the one Host header the middleware must admit
    allowed = command[command.index("--allowed-hosts") + 1].split(",")
    assert f"{MLFLOW_HOST}:{MLFLOW_PORT}" in allowed and allowed == list(ALLOWED_HOSTS) and "*" not in allowed
    assert "--default-artifact-root" not in command  # mlflow-artifacts:/, served by the proxy
    assert "--disable-security-middleware" not in command
    values = env(plan)
    assert values["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert values["AWS_DEFAULT_REGION"] == config.region
    probes = {c[p]["httpGet"]["path"] for p in ("startupProbe", "readinessProbe", "livenessProbe")}
    assert probes == {"/health"}  # exempt from the Host check (mlflow/server/security_utils.py HEALTH_ENDPOINTS)
    assert c["resources"]["requests"] == c["resources"]["limits"]
    assert server(plan)["spec"]["strategy"] == {"type": "Recreate"} and server(plan)["spec"]["replicas"] == 1


def test_rds_the_password_comes_from_a_secret_and_tls_is_verified() -> None:
    plan = shipped_plan("prod")
    values = env(plan)
    uri = values["MLFLOW_BACKEND_STORE_URI"]
    assert uri.startswith("mysql+pymysql://mlflow:$(MLFLOW_DB_PASSWORD)@") and f"ssl_ca={CA_FILE}" in uri
    assert ":3306/mlflow?" in uri
    names = [e["name"] for e in container(plan)["env"]]
    assert names.index("MLFLOW_DB_PASSWORD") < names.index("MLFLOW_BACKEND_STORE_URI")  # $(...) expands earlier vars
    assert values["MLFLOW_DB_PASSWORD"] == {"secretKeyRef": DB_PASSWORD.ref}
    assert objects(plan)[("Secret", DB_PASSWORD.name)]["stringData"] == {DB_PASSWORD.key: SECRET}
    ca, migrate = server(plan)["spec"]["template"]["spec"]["initContainers"]  # the CA first: migrate needs TLS
    assert CA_FILE in " ".join(ca["command"])
    assert ca["env"] == [{"name": "CA_URL",
                          "value": "https://truststore.pki.rds.amazonaws.com/us-west-2/us-west-2-bundle.pem"}]
    assert migrate["env"] == container(plan)["env"] and migrate["volumeMounts"] == container(plan)["volumeMounts"]


def test_rds_the_job_makes_the_database_and_a_user_of_its_own_before_the_server_starts() -> None:
    plan = shipped_plan("prod")
    job = objects(plan)[("Job", DB_USER_JOB)]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == DB_USER_JOB
    (grant,) = pod["containers"]
    script = grant["command"][-1]
    assert "CREATE DATABASE IF NOT EXISTS mlflow CHARACTER SET utf8mb4;" in script
    assert "GRANT ALL PRIVILEGES ON mlflow.* TO 'mlflow'@'%';" in script and "REQUIRE SSL" in script
    assert "slurm_acct_db" not in script
    # its own IRSA role, which reads the RDS master secret and nothing else
    (policy,) = role_policies(plan, irsa_role(plan, DB_USER_JOB))
    (statement,) = policy["Statement"]
    assert statement["Action"] == "secretsmanager:GetSecretValue" and statement["Resource"] != "*"
    deployment = manifest_resource(plan, "Deployment", MLFLOW_SERVICE)
    assert manifest_resource(plan, "Job", DB_USER_JOB).urn in deployment.dependencies


def test_in_cluster_sqlite_on_a_retained_volume(tmp_path: Path) -> None:
    plan = plan_of(variant("dev", in_cluster), tmp_path)
    assert env(plan)["MLFLOW_BACKEND_STORE_URI"] == SQLITE_URI == "sqlite:////mlflow/mlflow.db"
    claim = objects(plan)[("PersistentVolumeClaim", DATA_CLAIM)]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    storage_class = next(d for d in plan.manifests() if d["kind"] == "StorageClass")
    assert claim["spec"]["storageClassName"] == storage_class["metadata"]["name"]
    assert storage_class["reclaimPolicy"] == "Retain" and storage_class["parameters"]["encrypted"] == "true"
    assert ("Job", DB_USER_JOB) not in objects(plan)
    (migrate,) = server(plan)["spec"]["template"]["spec"]["initContainers"]  # no CA to fetch
    assert migrate["command"] == MIGRATE and migrate["image"] == IMAGE
    deployment = manifest_resource(plan, "Deployment", MLFLOW_SERVICE)
    assert manifest_resource(plan, "PersistentVolumeClaim", DATA_CLAIM).urn in deployment.dependencies


def test_the_server_alone_holds_s3_rights_and_only_on_its_prefix(stack: tuple[str, Plan, ClusterConfig]) -> None:
    _, plan, config = stack
    role = irsa_role(plan, MLFLOW_SERVICE)
    assert role_policies(plan, role) == [artifact_policy("aws", config.addons.mlflow.artifacts)]
    account = objects(plan)[("ServiceAccount", MLFLOW_SERVICE)]
    assert "eks.amazonaws.com/role-arn" in account["metadata"]["annotations"]
    assert server(plan)["spec"]["template"]["spec"]["serviceAccountName"] == MLFLOW_SERVICE


def test_the_s3_gateway_endpoint_admits_the_artifact_bucket(stack: tuple[str, Plan, ClusterConfig]) -> None:
    _, plan, config = stack
    bucket = config.addons.mlflow.artifacts.removeprefix("s3://").split("/")[0]
    (endpoint,) = plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    statements = {s["Sid"]: s for s in json.loads(endpoint.inputs["policy"])["Statement"]}
    assert f"arn:aws:s3:::{bucket}" in statements["StackBuckets"]["Resource"]
    assert f"arn:aws:s3:::{bucket}/*" in statements["StackBucketObjects"]["Resource"]


def test_the_server_runs_on_the_system_nodes_or_its_pool(stack: tuple[str, Plan, ClusterConfig]) -> None:
    name, plan, _ = stack
    spec = server(plan)["spec"]["template"]["spec"]
    if name == "prod-on-pool":
        assert spec["nodeSelector"] == {POOL_LABEL: "ml-a10g"}
        assert {t["key"] for t in spec["tolerations"]} >= {"nvidia.com/gpu"}
    else:
        assert spec["nodeSelector"] == {"node.slurm-eks.io/role": "system"} and "tolerations" not in spec


def test_the_deploy_check_passes(stack: tuple[str, Plan, ClusterConfig]) -> None:
    _, plan, config = stack
    assert [f"{f.rule}: {f.resource}: {f.message}" for f in check_plan(plan, config)] == []


def test_without_the_addon_nothing_is_planned() -> None:
    plan = shipped_plan("dev")
    assert objects(plan) == {} and "mlflowTrackingUri" not in plan.outputs
