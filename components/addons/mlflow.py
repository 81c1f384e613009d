"""The MLflow tracking server and model registry (`addons.mlflow`): one Deployment and a ClusterIP Service in
namespace `mlflow`, reachable only from inside the cluster (MLFLOW_TRACKING_URI), where Slurm jobs, login shells
and notebooks log runs, metrics and model versions.

A Deployment of our own rather than a chart: mlflow/mlflow's chart (charts/, appVersion 3.11.1 at ed375243) is
young and not what the rest pins, and the few objects here are checked as the manifests they are (Pod Security, the
deploy check's pod-network and iam rules). Its choices are kept where they hold: the image `v<release>-full`
(charts/templates/_helpers.tpl `mlflow.image` at 97d6e87b), uid 1000 with a read-only root and an emptyDir at /tmp,
`/health` probes, Recreate with one pod (charts/values.yaml, charts/templates/deployment.yaml at 6fa20c81).

The image is `ghcr.io/mlflow/mlflow:v<MLFLOW_VERSION>-full`: the plain `v<release>` image is `pip install mlflow`
alone (docker/Dockerfile), without a MySQL driver or boto3; `-full` installs `mlflow[extras,azure,db,gateway,genai,
auth]` (docker/Dockerfile.full), whose `db` extra brings PyMySQL and `extras` boto3 (mlflow 3.17.2 METADATA
Provides-Extra). The release is the one the job side's client pins (pyproject.toml `registry`, mlflow-skinny).

Flags are `mlflow server`'s (mlflow 3.17.2 mlflow/cli/__init__.py `server`, mlflow/utils/cli_args.py): `--host
0.0.0.0` (its default 127.0.0.1 takes no connection from other pods), `--port`, `--workers`, `--serve-artifacts`
with `--artifacts-destination s3://...` (clients send artifacts to the server, which alone writes S3, so the
default artifact root is `mlflow-artifacts:/`: mlflow/utils/server_cli_utils.py resolve_default_artifact_root),
and `--allowed-hosts`, the security middleware's Host-header check against DNS rebinding, which by default admits
only localhost and private addresses (mlflow/server/security_utils.py get_default_allowed_hosts): the Service's
names here. The backend store URI is the CLI's MLFLOW_BACKEND_STORE_URI variable, so the database password never
appears in a command line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.catalog import Resources
from components.compute.nodepools import pool_scheduling
from components.config.cluster import ClusterConfig
from components.config.mlflow import Mlflow, split_s3
from components.kubernetes.namespaces import RESTRICTED_CONTAINER, Namespaces
from components.names import MLFLOW_HOST, MLFLOW_NAMESPACE, MLFLOW_PORT, MLFLOW_SERVICE, MLFLOW_TRACKING_URI
from components.slinky import accounting_db_user as db_user
from components.slinky.accounting_db import MARIADB_PORT
from components.slinky.specs import SecretKey, guaranteed

__all__ = ["MLFLOW_TRACKING_URI", "MlflowArgs", "MlflowServer"]

MLFLOW_VERSION = "3.17.2"
IMAGE = f"ghcr.io/mlflow/mlflow:v{MLFLOW_VERSION}-full"
SERVICE_ACCOUNT = MLFLOW_SERVICE
POD_LABELS = {"app.kubernetes.io/name": "mlflow", "app.kubernetes.io/component": "tracking-server"}
# The image sets no USER (python:3.11-slim-bookworm, docker/Dockerfile.full): the server runs as the uid mlflow's
# chart gives it (charts/values.yaml podSecurityContext runAsUser/fsGroup 1000), never root.
UID = 1000
# uvicorn workers (mlflow/cli: the default is 4); two fit RESOURCES with room, and one pod serves the cluster.
WORKERS = 2
RESOURCES = Resources(1000, 2048)
# An artifact reaches S3 through a file under /tmp first (mlflow/server/handlers.py _upload_artifact: S3 is not a
# StreamUploadMixin repository), so /tmp bounds the largest single upload; big checkpoints go by reference or by
# the client's multipart upload (MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD), which writes S3 directly (docs/mlflow.md).
TMP_GIB = 20
# The names a client may use for the server (its Host header), and localhost for `kubectl port-forward`.
ALLOWED_HOSTS = (f"{MLFLOW_HOST}:{MLFLOW_PORT}", f"{MLFLOW_SERVICE}.{MLFLOW_NAMESPACE}.svc:{MLFLOW_PORT}",
                 f"{MLFLOW_SERVICE}.{MLFLOW_NAMESPACE}:{MLFLOW_PORT}", "localhost:*")
# Off: the server's job executor runs user-supplied GenAI scorer code in subprocesses beside the S3 role and the
# database password, and calls model providers this cluster does not admit (mlflow 3.17.2 mlflow/server/__init__.py
# _run_server, mlflow/environment_variables.py MLFLOW_SERVER_ENABLE_JOB_EXECUTION, default on).
JOB_EXECUTION = "false"

# Before the server: `mlflow db upgrade` creates the tables of an empty database and migrates an older schema to
# the image's release (mlflow 3.17.2 mlflow/db.py upgrade: _initialize_tables or _upgrade_db, alembic to head; a
# no-op at head). Without it a new release refuses to start on the old schema (mlflow/store/db/utils.py
# _verify_schema: "Detected out-of-date database schema"). The CLI takes the URL as an argument only, so the
# command's own function is called with it from the environment: the password stays out of every argv.
MIGRATE = ["python", "-c", "import os, mlflow.db; mlflow.db.upgrade.callback(os.environ['MLFLOW_BACKEND_STORE_URI'])"]
MIGRATE_RESOURCES = Resources(500, 1024)

# database: rds. A database and user of its own on the accounting RDS instance (components/slinky/accounting_db.py),
# made by the accounting database-user Job's two containers (components/slinky/accounting_db_user.py) in this
# namespace: the master secret read through an IRSA role of this namespace, the grants over verified TLS.
DATABASE = "mlflow"
DB_USER = "mlflow"
DB_PASSWORD = SecretKey("mlflow-db-password", "password")
DB_USER_JOB = "mlflow-db-user"  # the Job and its service account
# RDS requires TLS (components/slinky/accounting_db.py RDS_SETTINGS require_secure_transport); the server verifies
# the instance's certificate against the region's RDS CA bundle, fetched at pod start like slurmdbd's
# (components/slinky/specs.py database_tls). SQLAlchemy's PyMySQL dialect turns the URL's ssl_ca into PyMySQL's
# ssl {"ca": ...} (sqlalchemy 2.1 dialects/mysql/mysqldb.py, "ssl_ca"), and PyMySQL then requires the certificate
# and checks the host name (PyMySQL 1.2.4 connections.py _create_ssl_ctx: CERT_REQUIRED, check_hostname).
CA_DIR = "/etc/mlflow/db-ca"
CA_FILE = f"{CA_DIR}/ca.pem"
# database: in-cluster. SQLite on an encrypted gp3 volume of the retained storage class: no second database server
# and no operator (mariadb-operator exists only with in-cluster accounting), and the image reads it with the
# standard library; one pod, replaced rather than rolled, since the volume mounts on one node and SQLite has one
# writer (the URL form: mlflow/mlflow charts/values.yaml mlflow.backendStoreUri "sqlite:////mlflow/mlflow.db").
DATA_DIR = "/mlflow"
SQLITE_URI = f"sqlite:///{DATA_DIR}/mlflow.db"
DATA_CLAIM = "mlflow-db"
DATA_GIB = 10


def artifact_policy(partition: str, artifacts: str) -> dict[str, Any]:
    """The server's S3 rights: list, read and write objects under its prefix, nothing else. PutObject covers
    CreateMultipartUpload, UploadPart and CompleteMultipartUpload, AbortMultipartUpload is its own action
    (docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html, "Multipart upload API and permissions"); HeadObject
    is GetObject's (API reference, HeadObject "Permissions"); ListObjectsV2 is s3:ListBucket, narrowed by the
    request's prefix (s3:prefix, docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html), which
    list_artifacts always ends with "/" (mlflow 3.17.2 s3_artifact_repo.py): `<prefix>` alone would also list the
    keys of a sibling `<prefix>-other/`. No delete: a run deleted in MLflow keeps its artifacts (the gateway
    endpoint admits no delete either, components/aws/vpc.py OBJECT_ACTIONS); an S3 lifecycle rule prunes them."""
    bucket, prefix = split_s3(artifacts)
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListArtifacts", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn,
         "Condition": {"StringLike": {"s3:prefix": f"{prefix}/*"}}},
        {"Sid": "ReadWriteArtifacts", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
         "Resource": f"{bucket_arn}/{prefix}/*"}]}


def server_command(mlflow: Mlflow) -> list[str]:
    return ["mlflow", "server", "--host", "0.0.0.0", "--port", str(MLFLOW_PORT), "--workers", str(WORKERS),
            "--serve-artifacts", "--artifacts-destination", mlflow.artifacts,
            "--allowed-hosts", ",".join(ALLOWED_HOSTS)]


def rds_uri(host: str) -> str:
    """The backend store URL on RDS; `$(MLFLOW_DB_PASSWORD)` is expanded by the kubelet from the variable defined
    before it (kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/). The
    password is alphanumeric (RandomPassword special=False): nothing in it needs URL quoting. The connection's
    charset is utf8mb4, as the database's (sqlalchemy 2.1 dialects/mysql/base.py, "Unicode": charset=utf8mb4)."""
    return (f"mysql+pymysql://{DB_USER}:$(MLFLOW_DB_PASSWORD)@{host}:{MARIADB_PORT}/{DATABASE}"
            f"?charset=utf8mb4&ssl_ca={CA_FILE}")


def scheduling(config: ClusterConfig, mlflow: Mlflow) -> dict[str, Any]:
    """The system nodes, or the pool's node selector and tolerations (rule mlflow-pool: it exists)."""
    if mlflow.pool is None:
        return {"nodeSelector": SYSTEM_NODE_SELECTOR}
    return pool_scheduling(mlflow.pool, config.kubernetes_pools[mlflow.pool])


def _restricted() -> dict[str, Any]:
    return {**RESTRICTED_CONTAINER, "readOnlyRootFilesystem": True}


def deployment_spec(config: ClusterConfig, mlflow: Mlflow, db_host: pulumi.Input[str] | None,
                    ca_bundle_url: pulumi.Input[str] | None) -> dict[str, Any]:
    """One server pod. Init containers first fetch, with RDS (`db_host`), the region's CA bundle, then bring the
    schema to the image's release (MIGRATE)."""
    env: list[dict[str, Any]] = [
        {"name": "HOME", "value": "/tmp"},  # nothing else is writable
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
        # boto3 reads its region here (botocore 1.44 configprovider.py `region`: AWS_DEFAULT_REGION; mlflow's
        # s3_artifact_repo.py lists it too): S3's regional endpoint, which the VPC's gateway endpoint serves.
        {"name": "AWS_DEFAULT_REGION", "value": config.region},
        {"name": "MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "value": JOB_EXECUTION},
    ]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": f"{TMP_GIB}Gi"}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    init: list[dict[str, Any]] = []
    if db_host is not None:
        env += [{"name": "MLFLOW_DB_PASSWORD", "valueFrom": {"secretKeyRef": DB_PASSWORD.ref}},
                {"name": "MLFLOW_BACKEND_STORE_URI", "value": pulumi.Output.from_input(db_host).apply(rds_uri)}]
        volumes.append({"name": "db-ca", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
        mounts.append({"name": "db-ca", "mountPath": CA_DIR, "readOnly": True})
        init.append({"name": "db-ca", "image": db_user.AWS_CLI_IMAGE,
                     "env": [{"name": "CA_URL", "value": ca_bundle_url}],
                     "command": ["sh", "-c", f'curl -fsS --retry 5 -o {CA_FILE} "$CA_URL"'],
                     "volumeMounts": [{"name": "db-ca", "mountPath": CA_DIR}],
                     "resources": guaranteed(Resources(100, 64)), "securityContext": _restricted()})
    else:
        env.append({"name": "MLFLOW_BACKEND_STORE_URI", "value": SQLITE_URI})
        volumes.append({"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}})
        mounts.append({"name": "data", "mountPath": DATA_DIR})
    init.append({"name": "migrate", "image": IMAGE, "command": MIGRATE, "workingDir": "/tmp", "env": env,
                 "resources": guaranteed(MIGRATE_RESOURCES), "securityContext": _restricted(), "volumeMounts": mounts})
    health = {"httpGet": {"path": "/health", "port": "http"}}  # exempt from the Host check (security_utils.py)
    container = {
        "name": "mlflow", "image": IMAGE, "command": server_command(mlflow), "workingDir": "/tmp", "env": env,
        "ports": [{"name": "http", "containerPort": MLFLOW_PORT}],
        # Imports and the database's first connections before /health answers: up to 5 minutes.
        "startupProbe": {**health, "periodSeconds": 10, "failureThreshold": 30},
        "readinessProbe": {**health, "periodSeconds": 10},
        "livenessProbe": {**health, "periodSeconds": 20, "failureThreshold": 3},
        "resources": guaranteed(RESOURCES, {"ephemeral-storage": f"{TMP_GIB}Gi"}),
        "securityContext": _restricted(),
        "volumeMounts": mounts,
    }
    return {
        "replicas": 1,
        # Never two servers at once: SQLite and its volume have one writer, and an old release must never run on a
        # schema the new one's MIGRATE has moved on.
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": POD_LABELS},
        "template": {"metadata": {"labels": POD_LABELS}, "spec": {
            "serviceAccountName": SERVICE_ACCOUNT,
            **scheduling(config, mlflow),
            "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": init,
            "containers": [container],
            "volumes": volumes,
        }},
    }


def service_spec() -> dict[str, Any]:
    """In the cluster only: a ClusterIP Service (no load balancer, no node port)."""
    return {"type": "ClusterIP", "selector": POD_LABELS,
            "ports": [{"name": "http", "port": MLFLOW_PORT, "targetPort": "http", "protocol": "TCP"}]}


def database_sql() -> str:
    """The database (utf8mb4 whatever the server's default: names and params are Unicode) and its user, with
    everything on it and nothing else, TLS required (accounting_db_user.grant_sql)."""
    return f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4;\n" + db_user.grant_sql(DB_USER, DATABASE)


def database_user_job_spec(host: pulumi.Input[str], secret_arn: pulumi.Input[str],
                           region: pulumi.Input[str]) -> dict[str, Any]:
    """The accounting database-user Job (components/slinky/accounting_db_user.py job_spec) under this namespace's
    service account, creating the `mlflow` database as well as its user."""
    spec = db_user.job_spec(host, MARIADB_PORT, DB_USER, DATABASE, secret_arn, region, DB_PASSWORD.name,
                            DB_PASSWORD.key)
    pod = spec["template"]["spec"]
    pod["serviceAccountName"] = DB_USER_JOB
    (grant,) = pod["containers"]
    grant["command"] = ["bash", "-c", db_user.grant_script(database_sql())]
    return spec


@dataclass(frozen=True)
class MlflowArgs:
    config: ClusterConfig
    namespaces: Namespaces
    cluster: EksCluster  # whose OIDC provider the IRSA roles trust
    rds: aws.rds.Instance | None  # the accounting RDS instance (database: rds)
    storage_class: pulumi.Input[str]  # encrypted gp3, retained: the SQLite volume (database: in-cluster)


class MlflowServer(pulumi.ComponentResource):
    """The namespace with its NetworkPolicies, the server's IRSA role for its artifact prefix, its database (a
    database and user on RDS, or a volume), the Deployment and the Service; `tracking_uri` is where clients log."""

    tracking_uri: str

    def __init__(self, name: str, args: MlflowArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:MlflowServer", name, None, opts)
        mlflow = args.config.addons.mlflow
        assert mlflow is not None
        child = pulumi.ResourceOptions(parent=self)
        provider = args.namespaces.provider
        namespace = args.namespaces.create(f"{name}-namespace", MLFLOW_NAMESPACE, self)

        def k8s_opts(*after: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[*namespace, *after])

        def meta(object_name: str, **more: Any) -> dict[str, Any]:
            return {"name": object_name, "namespace": MLFLOW_NAMESPACE, "labels": POD_LABELS, **more}

        role = args.cluster.irsa_role(f"{name}-server", MLFLOW_NAMESPACE, SERVICE_ACCOUNT, child)
        partition = aws.get_partition_output().partition
        policy = aws.iam.RolePolicy(f"{name}-artifacts", role=role.id, opts=child, policy=partition.apply(
            lambda p: json.dumps(artifact_policy(p, mlflow.artifacts))))
        # amazon-eks-pod-identity-webhook: the annotation has EKS project a web identity token into the pod and set
        # AWS_ROLE_ARN / AWS_WEB_IDENTITY_TOKEN_FILE, which boto3's credential chain trades with STS.
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa", metadata=meta(SERVICE_ACCOUNT, annotations={"eks.amazonaws.com/role-arn": role.arn}),
            opts=k8s_opts())
        after: list[pulumi.Resource] = [account, policy]
        db_host: pulumi.Input[str] | None = None
        ca_bundle_url: pulumi.Input[str] | None = None
        if mlflow.database == "rds":
            assert args.rds is not None  # rule mlflow-database: the accounting database is RDS
            region = aws.get_region_output().region
            db_host, ca_bundle_url = args.rds.address, region.apply(db_user.rds_ca_bundle_url)
            after += self._database_user(name, args.cluster, args.rds, region, k8s_opts)
        else:
            after.append(k8s.core.v1.PersistentVolumeClaim(
                f"{name}-data", metadata=meta(DATA_CLAIM),
                spec={"accessModes": ["ReadWriteOnce"], "storageClassName": args.storage_class,
                      "resources": {"requests": {"storage": f"{DATA_GIB}Gi"}}}, opts=k8s_opts()))
        k8s.apps.v1.Deployment(f"{name}-server", metadata=meta(MLFLOW_SERVICE),
                               spec=deployment_spec(args.config, mlflow, db_host, ca_bundle_url),
                               opts=k8s_opts(*after))
        k8s.core.v1.Service(f"{name}-service", metadata=meta(MLFLOW_SERVICE), spec=service_spec(), opts=k8s_opts())
        self.tracking_uri = MLFLOW_TRACKING_URI
        self.register_outputs({"trackingUri": self.tracking_uri})

    def _database_user(self, name: str, cluster: EksCluster, rds: aws.rds.Instance, region: pulumi.Output[str],
                       k8s_opts: Any) -> list[pulumi.Resource]:
        """The password Secret and the Job that makes the database and its user (the server waits for both)."""
        child = pulumi.ResourceOptions(parent=self)
        password = random.RandomPassword(f"{name}-db-password", length=32, special=False, opts=child)
        secret = k8s.core.v1.Secret(f"{name}-db-password", metadata={"name": DB_PASSWORD.name,
                                                                      "namespace": MLFLOW_NAMESPACE},
                                    string_data={DB_PASSWORD.key: password.result}, opts=k8s_opts())
        secret_arn = rds.master_user_secrets.apply(lambda secrets: secrets[0].secret_arn)
        role = cluster.irsa_role(f"{name}-db-user", MLFLOW_NAMESPACE, DB_USER_JOB, child)
        policy = aws.iam.RolePolicy(f"{name}-db-user", role=role.id, opts=child,
                                    policy=secret_arn.apply(lambda arn: json.dumps(db_user.secret_read_policy(arn))))
        account = k8s.core.v1.ServiceAccount(
            f"{name}-db-user", metadata={"name": DB_USER_JOB, "namespace": MLFLOW_NAMESPACE,
                                         "annotations": {"eks.amazonaws.com/role-arn": role.arn}},
            automount_service_account_token=True, opts=k8s_opts())
        job = k8s.batch.v1.Job(
            f"{name}-db-user", metadata={"name": DB_USER_JOB, "namespace": MLFLOW_NAMESPACE,
                                         "annotations": db_user.RETRY_ANNOTATIONS},
            spec=database_user_job_spec(rds.address, secret_arn, region),
            opts=pulumi.ResourceOptions.merge(k8s_opts(rds, policy, account, secret),
                                              pulumi.ResourceOptions(custom_timeouts=db_user.AWAIT)))
        return [secret, job]
