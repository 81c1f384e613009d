"""The cluster side of the checkpoint store in a plan (dev with a store): the jobs' role, what it may do, how the
NodeSet pods carry it to jobs, the S3 endpoint admitting it; and the seam with the rendered script (the file it
sources and the token it mounts are where the pods put them)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.config.checkpoint_store import JOB_ENV_CONFIG_MAP, JOB_ENV_FILE, TOKEN_DIR, TOKEN_FILE
from components.slinky.job_aws import JOB_SERVICE_ACCOUNT
from jobs.render import render_job, target_for_partition
from scripts.offline.plan_model import Plan
from tests.conftest import REPO
from tests.slinky.helpers import config_of, objects, plan_of, variant

STORE = "s3://ml-checkpoint-store/dev"


def with_store(raw: dict[str, Any]) -> None:
    raw["storage"]["checkpointStore"] = {"s3": STORE}


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return plan_of(variant("dev", with_store), tmp_path_factory.mktemp("store"), "store")


def role_policy(plan: Plan) -> dict[str, Any]:
    (policy,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-jobs-checkpoint-store")]
    return json.loads(policy.inputs["policy"])


def test_the_jobs_role_may_use_the_store_prefix_and_nothing_else(plan: Plan) -> None:
    statements = {s["Sid"]: s for s in role_policy(plan)["Statement"]}
    assert statements["ListCheckpointStore"]["Resource"] == "arn:aws:s3:::ml-checkpoint-store"
    assert statements["ListCheckpointStore"]["Condition"] == {"StringLike": {"s3:prefix": ["dev", "dev/*"]}}
    assert statements["CheckpointStoreObjects"]["Resource"] == "arn:aws:s3:::ml-checkpoint-store/dev/*"
    assert "s3:DeleteObject" in statements["CheckpointStoreObjects"]["Action"]
    (role,) = [r for r in plan.of_type("aws:iam/role:Role") if r.name.endswith("-jobs")]
    (trust,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    conditions = trust["Condition"]["StringEquals"]
    assert [v for k, v in conditions.items() if k.endswith(":sub")] == [
        f"system:serviceaccount:slurm:{JOB_SERVICE_ACCOUNT}"]


def test_every_nodeset_carries_the_identity_to_jobs_where_the_script_reads_it(plan: Plan) -> None:
    (account,) = [a for a in objects(plan, "ServiceAccount").values() if a["metadata"]["name"] == JOB_SERVICE_ACCOUNT]
    assert account["automountServiceAccountToken"] is False  # the projected token below is the pods' only one
    env = objects(plan, "ConfigMap")[JOB_ENV_CONFIG_MAP]["data"]["job.env"]
    assert f"AWS_WEB_IDENTITY_TOKEN_FILE={TOKEN_FILE}" in env and "AWS_ROLE_ARN=" in env
    nodesets = objects(plan, "NodeSet")
    assert nodesets
    for nodeset in nodesets.values():
        template = nodeset["spec"]["template"]["spec"]
        assert template["serviceAccountName"] == JOB_SERVICE_ACCOUNT
        volumes = {v["name"]: v for v in template["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in nodeset["spec"]["slurmd"]["volumeMounts"]}
        (token,) = volumes["job-aws-token"]["projected"]["sources"]
        assert token["serviceAccountToken"]["audience"] == "sts.amazonaws.com"
        assert f"{mounts['job-aws-token']}/{token['serviceAccountToken']['path']}" == TOKEN_FILE
        assert volumes["job-aws-env"]["configMap"]["name"] == JOB_ENV_CONFIG_MAP
        assert f"{mounts['job-aws-env']}/job.env" == JOB_ENV_FILE

    # the rendered script sources that file and mounts that token into the store's container
    config = config_of(variant("dev", with_store))
    script = render_job(target_for_partition(config, "dev", "gpu"), ["jobs/train.py"])
    assert f". {JOB_ENV_FILE}" in script and f"{TOKEN_DIR}:{TOKEN_DIR}:ro" in script


def test_the_s3_endpoint_admits_the_store_and_its_pruning(plan: Plan) -> None:
    (endpoint,) = plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    statements = {s["Sid"]: s for s in json.loads(endpoint.inputs["policy"])["Statement"]}
    assert "arn:aws:s3:::ml-checkpoint-store" in statements["StackBuckets"]["Resource"]
    assert statements["CheckpointStorePrune"]["Action"] == "s3:DeleteObject"
    assert statements["CheckpointStorePrune"]["Resource"] == ["arn:aws:s3:::ml-checkpoint-store/dev/*"]


def test_without_a_store_jobs_have_no_aws_identity() -> None:
    plan = Plan.load(REPO / "tests" / "golden" / "dev")  # the shipped dev stack has no store
    assert JOB_SERVICE_ACCOUNT not in {a["metadata"]["name"] for a in objects(plan, "ServiceAccount").values()}
    for nodeset in objects(plan, "NodeSet").values():
        assert "serviceAccountName" not in nodeset["spec"]["template"]["spec"]


def test_every_call_the_store_makes_is_allowed_and_the_check_fires_without_delete() -> None:
    import copy

    from components.config.checkpoint_store import CheckpointStore
    from components.slinky.job_aws import store_policy
    from scripts.checks.iam import check
    from scripts.checks.iam_policy import evaluate
    from scripts.checks.iam_requests import Facts, checkpoint_store_calls
    from tests.plan.fixtures import one, shipped_plan

    policy = store_policy("aws", CheckpointStore(s3="s3://ml-data/checkpoint-store"))
    facts = Facts(partition="aws", region="us-west-2", account="123456789012", cluster="ml-training-prod",
                  kubernetes_version="1.33", checkpoint_store="s3://ml-data/checkpoint-store")
    calls = checkpoint_store_calls(facts)
    assert {c.request.action for c in calls} == {"s3:PutObject", "s3:AbortMultipartUpload", "s3:GetObject",
                                                 "s3:DeleteObject", "s3:ListBucket"}
    for call in calls:
        assert evaluate([("store", policy)], call.request).allowed, (call.request, call.source)

    plan = copy.deepcopy(shipped_plan("prod"))
    weakened = copy.deepcopy(policy)
    weakened["Statement"][1]["Action"] = [a for a in weakened["Statement"][1]["Action"] if a != "s3:DeleteObject"]
    one(plan, "aws:iam/rolePolicy:RolePolicy", "slurm-jobs-checkpoint-store").inputs["policy"] = json.dumps(weakened)
    findings = check(plan)
    assert findings and {f.message.split(" is denied ")[1].split(" on ")[0] for f in findings} == {"s3:DeleteObject"}
    assert all("the jobs' checkpoint store" in f.message for f in findings)
