"""What a job's steps may do in AWS: read and write the checkpoint store's prefix (storage.checkpointStore), as
an IAM role that only the compute pods' service account can assume (IRSA), and nothing else.

A job runs as its submitter under slurmstepd, with the environment sbatch brought from the login pod, not the
slurmd container's: an IRSA webhook's variables would never reach it. So the NodeSet pods mount, explicitly:
- a projected service-account token for the audience `sts.amazonaws.com` (what IRSA's trust policy checks:
  components/aws/iam.py irsa_assume_role_policy), readable by the job's user (the pods run no other users'
  processes than jobs', which all share this role: docs/security.md "Known gaps");
- a ConfigMap `job.env` with AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_REGION, the variables boto3's
  credential chain reads for web identity (botocore credentials.py AssumeRoleWithWebIdentityProvider), which
  the job script sources before its checkpoint steps (jobs/templates/checkpoint_sync.sh).
Without a checkpoint store none of this exists: a job has no AWS identity at all."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import EksCluster
from components.config.checkpoint_store import (
    JOB_ENV_CONFIG_MAP,
    JOB_ENV_DIR,
    STORE_KEY,
    TOKEN_DIR,
    TOKEN_FILE,
    CheckpointStore,
)

JOB_SERVICE_ACCOUNT = "slurm-eks-jobs"
TOKEN_AUDIENCE = "sts.amazonaws.com"
# The kubelet refreshes a projected token at 80% of its life (Kubernetes docs, "Service account token volume
# projection"); a day keeps STS calls rare while a stolen token soon expires.
TOKEN_SECONDS = 86_400
STORE_OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload",
                        "s3:ListMultipartUploadParts"]  # fmt: skip


def bucket_and_prefix(store: CheckpointStore) -> tuple[str, str]:
    bucket, _, prefix = store.s3.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def store_policy(partition: str, store: CheckpointStore) -> dict[str, Any]:
    """List the store's prefix, and read, write and delete objects under it (jobs/checkpoint_store: uploads in
    parts, head and get, prune), nothing else of the bucket."""
    bucket, prefix = bucket_and_prefix(store)
    objects = f"arn:{partition}:s3:::{bucket}/{prefix + '/' if prefix else ''}*"
    listing: dict[str, Any] = {"Sid": "ListCheckpointStore", "Effect": "Allow", "Action": "s3:ListBucket",
                               "Resource": f"arn:{partition}:s3:::{bucket}"}  # fmt: skip
    if prefix:
        listing["Condition"] = {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
    return {"Version": "2012-10-17", "Statement": [
        listing, {"Sid": "CheckpointStoreObjects", "Effect": "Allow", "Action": STORE_OBJECT_ACTIONS,
                  "Resource": objects}]}  # fmt: skip


def job_env(role_arn: str, region: str, store: CheckpointStore) -> str:
    """boto3's web-identity variables, and where the store is (for tools in jobs, and the twin's AWS)."""
    return (f"AWS_ROLE_ARN={role_arn}\nAWS_WEB_IDENTITY_TOKEN_FILE={TOKEN_FILE}\nAWS_REGION={region}\n"
            f"AWS_STS_REGIONAL_ENDPOINTS=regional\n{STORE_KEY}={store.s3}\n")


def nodeset_additions(store: CheckpointStore | None) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                             list[dict[str, Any]]]:  # fmt: skip
    """(pod spec fields, volumes, slurmd's mounts) for the NodeSets: nothing without a store."""
    if store is None:
        return {}, [], []
    volumes = [
        {"name": "job-aws-token", "projected": {"defaultMode": 0o444, "sources": [{"serviceAccountToken": {
            "audience": TOKEN_AUDIENCE, "expirationSeconds": TOKEN_SECONDS, "path": "token"}}]}},
        {"name": "job-aws-env", "configMap": {"name": JOB_ENV_CONFIG_MAP, "defaultMode": 0o444}},
    ]
    mounts = [{"name": "job-aws-token", "mountPath": TOKEN_DIR, "readOnly": True},
              {"name": "job-aws-env", "mountPath": JOB_ENV_DIR, "readOnly": True}]
    return {"serviceAccountName": JOB_SERVICE_ACCOUNT}, volumes, mounts


def job_identity(name: str, parent: pulumi.Resource, cluster: EksCluster, provider: k8s.Provider, namespace: str,
                 store: CheckpointStore, region: str, depends_on: list[pulumi.Resource]) -> list[pulumi.Resource]:
    """The role, its policy, the service account (no token automounted: the projected one above is the only
    token in the pods) and the ConfigMap; the NodeSets depend on them."""
    child = pulumi.ResourceOptions(parent=parent)
    role = cluster.irsa_role(f"{name}-jobs", namespace, JOB_SERVICE_ACCOUNT, child)
    partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=parent)).partition
    policy = aws.iam.RolePolicy(f"{name}-jobs-checkpoint-store", role=role.id,
                                policy=partition.apply(lambda p: json.dumps(store_policy(p, store))), opts=child)
    k8s_opts = pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=depends_on)
    account = k8s.core.v1.ServiceAccount(
        f"{name}-jobs", metadata={"name": JOB_SERVICE_ACCOUNT, "namespace": namespace,
                                  "annotations": {"eks.amazonaws.com/role-arn": role.arn}},
        automount_service_account_token=False, opts=k8s_opts)
    env = k8s.core.v1.ConfigMap(
        f"{name}-job-aws", metadata={"name": JOB_ENV_CONFIG_MAP, "namespace": namespace},
        data={"job.env": role.arn.apply(lambda arn: job_env(arn, region, store))}, opts=k8s_opts)
    return [policy, account, env]
