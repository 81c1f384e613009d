"""Configs that break each rule of components/config/rules/mlflow.py, in the shape of test_validators.CASES:
(stack, mutation, config path, words of the message). Every case starts from prod, whose accounting is on RDS."""

from __future__ import annotations

from tests.config.helpers import Mutation, set_at

ML = "addons.mlflow"

MLFLOW_CASES: dict[str, list[tuple[str, Mutation, str, str]]] = {
    "mlflow-artifacts": [
        ("prod", set_at(f"{ML}.artifacts", "/shared/mlflow"), f"{ML}.artifacts", "not an S3 location"),
        ("prod", set_at(f"{ML}.artifacts", "s3://ML_Data/mlflow"), f"{ML}.artifacts", "not an S3 bucket name"),
        ("prod", set_at(f"{ML}.artifacts", "s3://ml-data"), f"{ML}.artifacts", "would hold the whole bucket"),
        ("prod", set_at(f"{ML}.artifacts", "s3://ml-data/mlflow/*"), f"{ML}.artifacts", "IAM reads as a wildcard"),
        ("prod", set_at(f"{ML}.artifacts", "s3://ml-data/checkpoints/mlflow"), f"{ML}.artifacts",
         "shares objects with storage.fsx.repositories[1]"),
    ],
    "mlflow-database": [
        ("prod", set_at("slurm.accounting.database", "in-cluster"), f"{ML}.database", "there is no RDS instance"),
    ],
    "mlflow-pool": [
        ("prod", set_at(f"{ML}.pool", "gpu-h100"), f"{ML}.pool", "not a Kubernetes pool"),
    ],
    "mlflow-pool-idle": [
        ("prod", set_at(f"{ML}.pool", "ml-a10g"), f"{ML}.pool", "a g5.xlarge (1 A10G) of pool ml-a10g stays up"),
    ],
}
