"""slurmdbd's own database user on Amazon RDS: a Job that logs in as the master user and creates (or updates)
`slurm` with rights on the accounting database only, over TLS that verifies the RDS certificate.

RDS keeps the master password in Secrets Manager (`manage_master_user_password`), so neither Pulumi's state nor
any Kubernetes object holds it. The Job's init container reads that one secret through IRSA (a role allowed only
`secretsmanager:GetSecretValue` on it) into a memory-backed emptyDir, with the region's RDS CA bundle; the
MariaDB client container then runs the grants. slurmdbd logs in as `slurm` with the RandomPassword in the
`slurm-db-password` Secret, which stays the only database password Pulumi knows.

What `slurm` may do is what Slurm's accounting guide asks for (slurm.schedmd.com/accounting.html, "GRANT ALL ON
StorageLoc.* TO 'slurm'@..."): everything on `slurm_acct_db`, nothing else (no other database, no `mysql.*`).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.catalog import Resources

# The AWS CLI v2 image from ECR Public (AWS CLI user guide, "Run the official Amazon ECR Public or Docker images
# for the AWS CLI": public.ecr.aws/aws-cli/aws-cli, one tag per CLI release); it has sh and curl.
AWS_CLI_IMAGE = "public.ecr.aws/aws-cli/aws-cli:2.27.26"
# The MariaDB image mariadb-operator 26.6.0 runs (config/manager/manager.yaml RELATED_IMAGE_MARIADB), the same
# server the in-cluster option deploys: its `mariadb` client and bash.
MARIADB_IMAGE = "mariadb:11.4.5"
MASTER_USERNAME = "dbadmin"  # RDS's master user; slurmdbd never uses it
SERVICE_ACCOUNT = "slurm-db-user"
WORK_DIR = "/run/slurm-db"  # memory-backed emptyDir shared by the two containers
MASTER_SECRET_FILE = f"{WORK_DIR}/master.json"
CA_FILE = f"{WORK_DIR}/rds-ca.pem"
SLURM_PASSWORD_DIR = "/etc/slurm-db"
RESOURCES = Resources(100, 128)
BACKOFF_LIMIT = 6  # about 10 minutes of retries while the instance finishes coming up (see accounts.py)
AWAIT = pulumi.CustomTimeouts(create="30m", update="30m")
RETRY_ANNOTATIONS = {"pulumi.com/replaceUnready": "true"}


def rds_ca_bundle_url(region: str) -> str:
    """The region's RDS CA bundle (RDS User Guide, UsingWithRDS.SSL.html, "Certificate bundles by AWS Region")."""
    return f"https://truststore.pki.rds.amazonaws.com/{region}/{region}-bundle.pem"


def secret_read_policy(secret_arn: str) -> dict[str, Any]:
    """Read that one secret, nothing else. RDS encrypts it with the AWS managed key aws/secretsmanager unless
    told otherwise, whose key policy lets Secrets Manager decrypt for any caller allowed GetSecretValue, so no
    kms:Decrypt is needed (Secrets Manager User Guide, security-encryption.html)."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "ReadRdsMasterSecret", "Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
        "Resource": secret_arn}]}


def grant_sql(user: str, database: str) -> str:
    """Idempotent: creates the user or resets its password, and requires TLS for every login. The password comes
    from the shell variable SLURM_PASSWORD, checked to be alphanumeric before the unquoted here-document puts it
    into the SQL (so no backquotes here: the shell would run them)."""
    account = f"'{user}'@'%'"
    return (f"CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '${{SLURM_PASSWORD}}' REQUIRE SSL;\n"
            f"ALTER USER {account} IDENTIFIED BY '${{SLURM_PASSWORD}}' REQUIRE SSL;\n"
            f"GRANT ALL PRIVILEGES ON {database}.* TO {account};\n")


FETCH_SCRIPT = f"""set -eu
umask 077
aws secretsmanager get-secret-value --secret-id "$MASTER_SECRET_ARN" --query SecretString --output text \\
  > {MASTER_SECRET_FILE}
curl -fsS --retry 5 -o {CA_FILE} "$RDS_CA_BUNDLE_URL"
"""


# The client container's bash script. The secret is RDS's JSON {"username": ..., "password": ...}: the image has
# no JSON tool, so sed takes the two strings and undoes JSON's escapes of '"', '\' and '/'. The master password
# reaches the client in MYSQL_PWD, never on a command line.
GRANT_SCRIPT = r"""set -euo pipefail
fail() { echo "$*" >&2; exit 1; }
json=$(cat "$MASTER_SECRET_FILE")
field() {
  local raw
  raw=$(printf '%s' "$json" | sed -nE 's/.*"'"$1"'"[[:space:]]*:[[:space:]]*"((\\.|[^"\\])*)".*/\1/p')
  [ -n "$raw" ] || fail "the master secret has no string field $1"
  case "$raw" in *'\u'*) fail "the master secret's $1 has a \\u escape, which this script does not decode";; esac
  printf '%s' "$raw" | sed -E 's/\\(["\\/])/\1/g'
}
master_user=$(field username)
MYSQL_PWD=$(field password)
export MYSQL_PWD
SLURM_PASSWORD=$(cat "$SLURM_PASSWORD_FILE")
[[ "$SLURM_PASSWORD" =~ ^[A-Za-z0-9]+$ ]] || fail "the slurm password must be alphanumeric"
mariadb --no-defaults --host="$DB_HOST" --port="$DB_PORT" --user="$master_user" \
  --ssl-ca="$CA_FILE" --ssl-verify-server-cert --batch <<SQL
__SQL__SQL
echo "database user ready"
"""


def grant_script(sql: str) -> str:
    return GRANT_SCRIPT.replace("__SQL__", sql)


def job_spec(host: pulumi.Input[str], port: int, user: str, database: str, secret_arn: pulumi.Input[str],
             region: pulumi.Input[str], password_secret: str, password_key: str) -> dict[str, Any]:
    env_common = [{"name": "MASTER_SECRET_FILE", "value": MASTER_SECRET_FILE}, {"name": "CA_FILE", "value": CA_FILE}]
    work = {"name": "work", "mountPath": WORK_DIR}
    return {
        "backoffLimit": BACKOFF_LIMIT,
        "template": {"spec": {
            "restartPolicy": "Never",
            "serviceAccountName": SERVICE_ACCOUNT,
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 999, "runAsGroup": 999, "fsGroup": 999,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": [{
                "name": "fetch", "image": AWS_CLI_IMAGE, "command": ["sh", "-c", FETCH_SCRIPT],
                "env": [{"name": "MASTER_SECRET_ARN", "value": secret_arn},
                        {"name": "RDS_CA_BUNDLE_URL",
                         "value": pulumi.Output.from_input(region).apply(rds_ca_bundle_url)},
                        {"name": "AWS_REGION", "value": region}, {"name": "HOME", "value": WORK_DIR}],
                "resources": _guaranteed(), "securityContext": _restricted(), "volumeMounts": [work]}],
            "containers": [{
                "name": "grant", "image": MARIADB_IMAGE,
                "command": ["bash", "-c", grant_script(grant_sql(user, database))],
                "env": [*env_common, {"name": "DB_HOST", "value": host}, {"name": "DB_PORT", "value": str(port)},
                        {"name": "SLURM_PASSWORD_FILE", "value": f"{SLURM_PASSWORD_DIR}/{password_key}"}],
                "resources": _guaranteed(), "securityContext": _restricted(),
                "volumeMounts": [{**work, "readOnly": True},
                                 {"name": "slurm-password", "mountPath": SLURM_PASSWORD_DIR, "readOnly": True}]}],
            "volumes": [{"name": "work", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                        {"name": "slurm-password", "secret": {"secretName": password_secret, "defaultMode": 0o400,
                                                              "items": [{"key": password_key, "path": password_key}]}}],
        }},
    }


def _guaranteed() -> dict[str, dict[str, str]]:
    amounts = {"cpu": f"{RESOURCES.cpu_millis}m", "memory": f"{RESOURCES.memory_mib}Mi"}
    return {"requests": amounts, "limits": dict(amounts)}


def _restricted() -> dict[str, Any]:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


def database_user_job(name: str, parent: pulumi.Resource, cluster: EksCluster, provider: k8s.Provider,
                      namespace: str, instance: aws.rds.Instance, port: int, region: pulumi.Input[str], user: str,
                      database: str,
                      password_secret: str, password_key: str, depends_on: list[pulumi.Resource]) -> k8s.batch.v1.Job:
    """The service account, its IRSA role and the Job; slurmdbd (the Accounting object) must depend on the Job."""
    child = pulumi.ResourceOptions(parent=parent)
    secret_arn = instance.master_user_secrets.apply(lambda secrets: secrets[0].secret_arn)
    role = cluster.irsa_role(f"{name}-db-user", namespace, SERVICE_ACCOUNT, child)
    policy = aws.iam.RolePolicy(f"{name}-db-user", role=role.id,
                                policy=secret_arn.apply(lambda arn: json.dumps(secret_read_policy(arn))), opts=child)
    k8s_opts = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on)
    account = k8s.core.v1.ServiceAccount(
        f"{name}-db-user", metadata={"name": SERVICE_ACCOUNT, "namespace": namespace,
                                     "annotations": {"eks.amazonaws.com/role-arn": role.arn}},
        automount_service_account_token=True, opts=k8s_opts)
    return k8s.batch.v1.Job(
        f"{name}-db-user",
        metadata={"name": SERVICE_ACCOUNT, "namespace": namespace, "annotations": RETRY_ANNOTATIONS},
        spec=job_spec(instance.address, port, user, database, secret_arn, region, password_secret, password_key),
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, custom_timeouts=AWAIT,
                                    depends_on=[*depends_on, instance, policy, account]))
