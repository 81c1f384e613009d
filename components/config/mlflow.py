"""`addons.mlflow`: an MLflow tracking server and model registry inside the cluster (components/addons/mlflow.py).
Without Pulumi, so the config can import it. Unset (the default) installs nothing.

Runs, metrics and registered model versions go to a database: `rds`, a database `mlflow` with a user of its own on
the stack's accounting RDS (`slurm.accounting.database: rds`), or `in-cluster`, SQLite on an encrypted, retained
EBS volume (one server pod). Artifacts go to `artifacts` (`s3://<bucket>/<prefix>`), which only the server writes,
through an IRSA role limited to that prefix: clients send artifacts to the server (MLflow's artifact proxy), so no
job, login shell or notebook holds S3 rights for them. The rules on these keys are components/config/rules/mlflow.py.
"""

from __future__ import annotations

from typing import Literal

from components.config.base import Model

S3_SCHEME = "s3://"


class Mlflow(Model):
    """Where the server keeps its records and artifacts, and which nodes it runs on."""

    # s3://<bucket>/<prefix>: the server's --artifacts-destination (rule mlflow-artifacts). The bucket joins the
    # stack's S3 gateway endpoint policy (components/aws/vpc.py) beside the FSx repositories' buckets.
    artifacts: str
    database: Literal["rds", "in-cluster"] = "rds"
    # A kubernetesPools entry; unset (the default): the system nodes, where the hub and the controllers run. A pool's
    # node never goes back to EC2 while the server runs on it (rule mlflow-pool-idle).
    pool: str | None = None


def split_s3(uri: str) -> tuple[str, str]:
    """s3://bucket/a/b -> ("bucket", "a/b"); no prefix -> ("bucket", "")."""
    bucket, _, prefix = uri.removeprefix(S3_SCHEME).partition("/")
    return bucket, prefix


def artifact_buckets(mlflow: Mlflow | None) -> tuple[str, ...]:
    """The bucket the S3 gateway endpoint must admit for the server (none without addons.mlflow)."""
    return (split_s3(mlflow.artifacts)[0],) if mlflow is not None else ()
