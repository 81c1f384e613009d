"""The server's IRSA policy, evaluated with the deploy check's IAM evaluator (scripts/checks/iam_policy.py): every
S3 call its artifact proxy makes under the prefix is allowed, and nothing outside it: no other prefix (a sibling
that merely starts the same included), no other bucket, no delete, no bucket settings. The deploy check's iam rule
fires on a plan whose policy falls short."""

from __future__ import annotations

import copy
import json

import pytest

from components.addons.mlflow import artifact_policy
from scripts.checks.iam import check
from scripts.checks.iam_policy import Request, evaluate
from scripts.checks.iam_requests import MLFLOW_RUN_PATH, Facts, mlflow_calls
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one, shipped_plan

ARTIFACTS = "s3://ml-data/mlflow"
POLICY = [("mlflow-artifacts", artifact_policy("aws", ARTIFACTS))]
FACTS = Facts(partition="aws", region="us-west-2", account="123456789012", cluster="ml-training-prod",
              kubernetes_version="1.33", mlflow_artifacts=ARTIFACTS)
REGION = {"aws:RequestedRegion": "us-west-2"}


def allowed(action: str, resource: str, **context: str) -> bool:
    return evaluate(POLICY, Request(action, resource, {**REGION, **context})).allowed


def test_every_call_of_the_artifact_proxy_is_allowed() -> None:
    calls = mlflow_calls(FACTS)
    assert {c.request.action for c in calls} == {"s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject",
                                                 "s3:ListBucket"}
    for call in calls:
        assert evaluate(POLICY, call.request).allowed, (call.request, call.source)


@pytest.mark.parametrize("key", [
    "checkpoints/run-1/model.pt",  # an FSx repository's prefix in the same bucket
    "mlflow-other/1/x",  # starts like the prefix, is not under it
    "mlflow",  # the prefix's own name as a key
    "training-data/mlflow/1/x",
])
def test_objects_outside_the_prefix_are_denied(key: str) -> None:
    for action in ("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"):
        assert not allowed(action, f"arn:aws:s3:::ml-data/{key}")


def test_other_buckets_deletes_and_bucket_settings_are_denied() -> None:
    inside = f"arn:aws:s3:::ml-data/mlflow/{MLFLOW_RUN_PATH}/model.pt"
    assert allowed("s3:GetObject", inside)
    assert not allowed("s3:GetObject", f"arn:aws:s3:::other-bucket/mlflow/{MLFLOW_RUN_PATH}/model.pt")
    assert not allowed("s3:DeleteObject", inside)  # a run deleted in MLflow keeps its artifacts
    for action in ("s3:PutBucketPolicy", "s3:DeleteBucket", "s3:PutLifecycleConfiguration", "s3:PutObjectAcl"):
        assert not allowed(action, "arn:aws:s3:::ml-data") and not allowed(action, inside)


@pytest.mark.parametrize(("prefix", "ok"), [
    ("mlflow/", True), (f"mlflow/{MLFLOW_RUN_PATH}/", True),
    ("mlflow", False),  # would list mlflow-other/ too; the proxy always lists "<dir>/"
    ("", False), ("checkpoints/", False), ("mlflow-other/", False),
])
def test_listing_is_limited_to_the_prefix(prefix: str, ok: bool) -> None:
    assert allowed("s3:ListBucket", "arn:aws:s3:::ml-data", **{"s3:prefix": prefix}) is ok
    assert not allowed("s3:ListBucket", "arn:aws:s3:::other-bucket", **{"s3:prefix": prefix})


def test_a_listing_without_a_prefix_is_denied() -> None:
    assert not evaluate(POLICY, Request("s3:ListBucket", "arn:aws:s3:::ml-data", REGION)).allowed


def with_artifact_policy(document: dict[str, object]) -> Plan:
    plan = copy.deepcopy(shipped_plan("prod"))
    one(plan, "aws:iam/rolePolicy:RolePolicy", "mlflow-artifacts").inputs["policy"] = json.dumps(document)
    return plan


@pytest.mark.slow
def test_the_deploy_check_fires_when_the_policy_falls_short() -> None:
    document = artifact_policy("aws", ARTIFACTS)
    document["Statement"] = [s for s in document["Statement"] if s["Sid"] != "ListArtifacts"]
    findings = check(with_artifact_policy(document))
    assert findings and all(f.rule == "iam" and f.resource == "mlflow-server (aws:iam/role:Role)" for f in findings)
    assert {f.message.split(" is denied ")[1].split(" on ")[0] for f in findings} == {"s3:ListBucket"}
    assert all("the MLflow tracking server (system:serviceaccount:mlflow:mlflow)" in f.message for f in findings)


@pytest.mark.slow
def test_the_deploy_check_fires_on_a_policy_for_another_prefix() -> None:
    findings = check(with_artifact_policy(artifact_policy("aws", "s3://ml-data/registry")))
    denied = {f.message.split(" is denied ")[1].split(" on ")[0] for f in findings}
    assert denied == {"s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject", "s3:ListBucket"}
