"""Grafana's CloudWatch data source, for the FSx for Lustre dashboard (components/observability/dashboards/fsx.json).

Grafana reads CloudWatch metrics as an IRSA role that only its own service account can assume, through the AWS
SDK's default chain (the web identity token EKS's pod identity webhook mounts). The role may read metrics and
nothing else: no logs, alarms, EC2 or tags.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from components.aws.eks import EksCluster
from components.kubernetes import namespaces

# grafana-community/helm-charts grafana-12.10.4 charts/grafana/templates/_helpers.tpl: grafana.serviceAccountName
# is grafana.fullname, `<release>-grafana` for release `prometheus` (components/lifecycle/autoscaling.py
# PROMETHEUS_RELEASE). Set explicitly in the values, so the role's trust and the account cannot drift apart.
GRAFANA_SERVICE_ACCOUNT = "prometheus-grafana"
CLOUDWATCH_UID = "cloudwatch"  # the dashboards' datasource uid (tests/observability/checks.py)
# github.com/grafana/grafana docs/sources/datasources/aws-cloudwatch/configure/index.md "Metrics-only
# permissions" lists these two plus alarms (annotations), GetInsightRuleReport (Contributor Insights), EC2 and
# tag:GetResources (EC2 and resource-tag variables), which no dashboard here uses. Queries go through
# GetMetricData and the editor's and variables' namespace/metric/dimension lists through ListMetrics;
# GetMetricStatistics is in neither that policy nor our queries.
READ_METRICS_ACTIONS = ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics")


def read_metrics_policy() -> dict[str, Any]:
    """Resource "*": neither action has a resource type (docs.aws.amazon.com/service-authorization/latest/
    reference/list_amazoncloudwatch.html, Actions table: no Resource types for GetMetricData, ListMetrics)."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": list(READ_METRICS_ACTIONS), "Resource": "*"}]}


def cloudwatch_data_source(region: str) -> dict[str, Any]:
    """One entry of Grafana's datasources provisioning list (github.com/grafana/grafana
    docs/sources/datasources/aws-cloudwatch/configure/index.md "Provision the data source", Using AWS SDK
    (default); `uid`, `editable`: docs/sources/administration/provisioning/index.md)."""
    return {"name": "CloudWatch", "type": "cloudwatch", "uid": CLOUDWATCH_UID, "access": "proxy",
            "editable": False, "jsonData": {"authType": "default", "defaultRegion": region}}


def grafana_values(region: str, role_arn: pulumi.Input[str]) -> dict[str, Any]:
    """Merge into kube-prometheus-stack's `grafana` values."""
    return {
        # grafana-12.10.4 charts/grafana/values.yaml serviceAccount.name, serviceAccount.annotations (its
        # commented example is this very key).
        "serviceAccount": {"name": GRAFANA_SERVICE_ACCOUNT, "annotations": {"eks.amazonaws.com/role-arn": role_arn}},
        # kube-prometheus-stack-88.2.0 values.yaml grafana.additionalDataSources, rendered next to the Prometheus
        # one by templates/grafana/configmaps-datasources.yaml.
        "additionalDataSources": [cloudwatch_data_source(region)],
    }


class GrafanaCloudWatch(pulumi.ComponentResource):
    """The role Grafana's service account assumes to read CloudWatch metrics."""

    role_arn: pulumi.Output[str]

    def __init__(self, name: str, cluster: EksCluster, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:GrafanaCloudWatch", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = cluster.irsa_role(name, namespaces.MONITORING, GRAFANA_SERVICE_ACCOUNT, child)
        aws.iam.RolePolicy(name, role=role.id, policy=json.dumps(read_metrics_policy()), opts=child)
        self.role_arn = role.arn
        self.register_outputs({"roleArn": self.role_arn})
