"""`addons.mlflow`: its keys, defaults and the edges of its rules (the rules' firing cases are tests/mlflow/cases.py,
run by tests/config/test_validators.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.mlflow import Mlflow, artifact_buckets, split_s3
from components.config.problems import ConfigError
from components.config.rules.mlflow import bucket_problem
from components.config.validation import parse_cluster_config
from tests.config.helpers import problems_of_rule, raw_config

ML = "addons.mlflow"


def with_mlflow(**mlflow: Any) -> dict[str, Any]:
    raw = raw_config("prod")
    raw["addons"]["mlflow"] = mlflow
    return raw


def test_prod_enables_it_on_rds_and_the_system_nodes() -> None:
    config, _ = parse_cluster_config(raw_config("prod"))
    assert config.addons.mlflow == Mlflow(artifacts="s3://ml-data/mlflow", database="rds", pool=None)
    assert artifact_buckets(config.addons.mlflow) == ("ml-data",)
    dev, _ = parse_cluster_config(raw_config("dev"))
    assert dev.addons.mlflow is None and artifact_buckets(None) == ()


def test_rds_is_the_default_database() -> None:
    config, _ = parse_cluster_config(with_mlflow(artifacts="s3://ml-data/mlflow"))
    assert config.addons.mlflow is not None and config.addons.mlflow.database == "rds"


@pytest.mark.parametrize(("key", "value", "words"), [
    ("database", "postgres", "'rds' or 'in-cluster'"),
    ("replicas", 2, "unknown key `replicas`"),
])
def test_unknown_values_and_keys_are_refused(key: str, value: Any, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(with_mlflow(artifacts="s3://ml-data/mlflow", **{key: value}))
    assert any(f.path == f"{ML}.{key}" and words in f.message for f in caught.value.findings), caught.value.render()


def test_artifacts_are_required() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(with_mlflow(database="rds"))
    assert any(f.path == f"{ML}.artifacts" for f in caught.value.findings)


def test_split_s3() -> None:
    assert split_s3("s3://ml-data/mlflow/prod") == ("ml-data", "mlflow/prod")
    assert split_s3("s3://ml-data") == ("ml-data", "")


@pytest.mark.parametrize(("bucket", "problem"), [
    ("ml-data", None), ("a.b-c", None), ("abc", None),
    ("ab", "3 to 63"), ("a" * 64, "3 to 63"), ("ML-data", "3 to 63"), ("-data", "3 to 63"), ("data-", "3 to 63"),
    ("ml_data", "3 to 63"), ("ml..data", "adjacent dots"), ("192.168.5.4", "IP address"),
    ("xn--data", "xn-- is reserved"), ("sthree-data", "sthree- is reserved"), ("data-s3alias", "-s3alias is reserved"),
    ("data--ol-s3", "--ol-s3 is reserved"), ("data.mrap", ".mrap is reserved"), ("data--x-s3", "--x-s3 is reserved"),
])
def test_bucket_names_follow_s3s_rules(bucket: str, problem: str | None) -> None:
    found = bucket_problem(bucket)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(("artifacts", "ok"), [
    ("s3://ml-data/mlflow", True), ("s3://ml-data/teams/mlflow-prod", True), ("s3://ml-data/a/b.c/(x)", True),
    ("s3://other-bucket/checkpoints", True),  # the FSx repository's prefix, in another bucket
    ("s3://ml-data/checkpoints-mlflow", True),  # a sibling of a repository's prefix, not inside it
    ("s3://ml-data/mlflow/", False), ("s3://ml-data//mlflow", False), ("s3://ml-data/ml flow", False),
    ("s3://ml-data/../checkpoints", False), ("s3://ml-data/ml?flow", False),
    ("s3://ml-data/checkpoints", False), ("s3://ml-data/training-data/mlflow", False),
    ("s3://ml-data/", False), ("S3://ml-data/mlflow", False), ("https://ml-data.s3.amazonaws.com/mlflow", False),
])
def test_artifact_locations(artifacts: str, ok: bool) -> None:
    found = problems_of_rule(with_mlflow(artifacts=artifacts), "mlflow-artifacts")
    assert (found == []) is ok, found
    assert all(f.path == f"{ML}.artifacts" and f.fix for f in found)


def test_a_repository_at_the_bucket_root_overlaps_every_prefix() -> None:
    raw = with_mlflow(artifacts="s3://ml-data/mlflow")
    raw["storage"]["fsx"]["repositories"][0]["s3"] = "s3://ml-data"
    (found,) = problems_of_rule(raw, "mlflow-artifacts")
    assert "storage.fsx.repositories[0]" in found.message


def test_in_cluster_needs_no_rds() -> None:
    raw = with_mlflow(artifacts="s3://ml-data/mlflow", database="in-cluster")
    raw["slurm"]["accounting"]["database"] = "in-cluster"
    assert problems_of_rule(raw, "mlflow-database") == []


def test_a_pool_is_accepted_with_a_warning_only() -> None:
    raw = with_mlflow(artifacts="s3://ml-data/mlflow", pool="ml-trn1")
    config, warnings = parse_cluster_config(raw)
    assert config.addons.mlflow is not None and config.addons.mlflow.pool == "ml-trn1"
    (warning,) = [w for w in warnings if w.rule == "mlflow-pool-idle"]
    assert warning.severity == "warning" and "trn1.32xlarge (16 Trainium)" in warning.message
    assert problems_of_rule(raw, "mlflow-pool") == []
