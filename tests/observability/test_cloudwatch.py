"""Grafana's CloudWatch access (components/observability/cloudwatch.py) in a fresh offline plan of prod (the
golden plans lag behind until refreshed): the role only Grafana's service account can assume, metric reads only,
the data source, and the FSx dashboard defaulting to the stack's file system; each check shown failing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.config.stackfile import load_stack
from components.observability.cloudwatch import (
    CLOUDWATCH_UID,
    GRAFANA_SERVICE_ACCOUNT,
    cloudwatch_data_source,
    read_metrics_policy,
)
from components.observability.stack import FSX_VARIABLE, kube_prometheus_values
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one

ROLE, POLICY = "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"
READS = {"cloudwatch:GetMetricData", "cloudwatch:ListMetrics"}


@pytest.fixture(scope="module")
def prod() -> Plan:
    plan, _ = run_plan("prod")
    return plan


def actions_problems(policy: dict[str, Any]) -> list[str]:
    """Anything beyond the two metric reads, or scoped where they have no resource type."""
    problems = [f"{s.get('Effect')} {s.get('Action')} on {s.get('Resource')}" for s in policy["Statement"]
                if s.get("Effect") != "Allow" or s.get("Resource") != "*" or set(s.get("Action", [])) - READS]
    granted = {a for s in policy["Statement"] for a in s.get("Action", [])}
    return problems + [f"missing {a}" for a in sorted(READS - granted)]


def trust_problems(trust: dict[str, Any]) -> list[str]:
    """Anyone but monitoring/<Grafana's service account> through the cluster's OIDC provider."""
    (statement,) = trust["Statement"]
    conditions = statement["Condition"]["StringEquals"]
    subjects = [v for k, v in conditions.items() if k.endswith(":sub")]
    expected = [f"system:serviceaccount:monitoring:{GRAFANA_SERVICE_ACCOUNT}"]
    return ([] if statement["Action"] == "sts:AssumeRoleWithWebIdentity" else [statement["Action"]]) + (
        [] if subjects == expected else [f"subjects {subjects}"])


def test_the_policy_allows_the_metric_reads_only(prod: Plan) -> None:
    planned = json.loads(one(prod, POLICY, "grafana-cloudwatch").inputs["policy"])
    assert planned == read_metrics_policy() and actions_problems(planned) == []
    wider = {"Version": "2012-10-17", "Statement": [
        *planned["Statement"], {"Effect": "Allow", "Action": ["logs:StartQuery"], "Resource": "*"}]}
    assert actions_problems(wider) == ["Allow ['logs:StartQuery'] on *"]
    assert actions_problems({"Statement": [{"Effect": "Allow", "Action": ["cloudwatch:ListMetrics"],
                                            "Resource": "*"}]}) == ["missing cloudwatch:GetMetricData"]


def test_only_grafanas_service_account_assumes_the_role(prod: Plan) -> None:
    trust = json.loads(one(prod, ROLE, "grafana-cloudwatch").inputs["assumeRolePolicy"])
    assert trust_problems(trust) == []
    statement = trust["Statement"][0]
    key = next(k for k in statement["Condition"]["StringEquals"] if k.endswith(":sub"))
    statement["Condition"]["StringEquals"][key] = "system:serviceaccount:monitoring:*"
    assert trust_problems(trust) == ["subjects ['system:serviceaccount:monitoring:*']"]


def test_grafana_carries_the_role_and_the_cloudwatch_data_source(prod: Plan) -> None:
    grafana = next(r for r in prod.resources if r.inputs.get("name") == "prometheus")
    values = grafana.inputs["values"]["grafana"]
    assert values["serviceAccount"]["name"] == GRAFANA_SERVICE_ACCOUNT
    assert values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(":role/grafana-cloudwatch")
    assert values["additionalDataSources"] == [
        {"name": "CloudWatch", "type": "cloudwatch", "uid": CLOUDWATCH_UID, "access": "proxy", "editable": False,
         "jsonData": {"authType": "default", "defaultRegion": load_stack("prod")[0].region}}]


def test_values_take_the_role_and_the_region() -> None:
    config = load_stack("prod")[0]
    grafana = kube_prometheus_values(config, "arn:role")["grafana"]
    assert grafana["serviceAccount"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:role"}
    assert grafana["additionalDataSources"] == [cloudwatch_data_source(config.region)]
    assert cloudwatch_data_source("eu-west-1")["jsonData"] == {"authType": "default", "defaultRegion": "eu-west-1"}


def test_the_fsx_dashboard_starts_on_the_stacks_file_system(prod: Plan) -> None:
    fs_id = one(prod, "aws:fsx/lustreFileSystem:LustreFileSystem").id
    (config_map,) = [d for d in prod.manifests() if d["kind"] == "ConfigMap"
                     and d["metadata"]["name"] == "dashboard-fsx"]
    (variable,) = [v for v in json.loads(config_map["data"]["fsx.json"])["templating"]["list"]
                   if v["name"] == FSX_VARIABLE]
    assert fs_id and variable["current"] == {"selected": True, "text": fs_id, "value": fs_id}
