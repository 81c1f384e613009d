"""Karpenter in the plan: controller IAM and chart, the interruption queue and its five rules, node role."""

from __future__ import annotations

import json

from components.compute.karpenter import INTERRUPTION_EVENTS
from tests.plan.fixtures import one, shipped_plan


def test_interruption_queue_gets_all_five_event_kinds() -> None:
    plan = shipped_plan("prod")
    queue = one(plan, "aws:sqs/queue:Queue")
    assert queue.inputs["messageRetentionSeconds"] == 300 and queue.inputs["sqsManagedSseEnabled"] is True
    rules = plan.of_type("aws:cloudwatch/eventRule:EventRule")
    patterns = sorted(json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules)
    assert patterns == sorted(d for _, d in INTERRUPTION_EVENTS.values())
    assert "EC2 Capacity Reservation Instance Interruption Warning" in patterns
    targets = plan.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5 and all(t.inputs["arn"].startswith("arn:aws:sqs:us-west-2:") for t in targets)
    policy = json.loads(one(plan, "aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    allow, deny = policy["Statement"]
    assert allow["Principal"]["Service"] == ["events.amazonaws.com", "sqs.amazonaws.com"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_controller_chart_runs_on_system_nodes_with_irsa() -> None:
    plan = shipped_plan("prod")
    releases = {r.inputs["name"]: r for r in plan.of_type("kubernetes:helm.sh/v3:Release")}
    crd, controller = releases["karpenter-crd"], releases["karpenter"]
    assert controller.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert controller.inputs["version"] == crd.inputs["version"] == "1.14.1"
    assert controller.inputs["skipCrds"] is True and crd.urn in controller.dependencies
    values = controller.inputs["values"]
    assert values["settings"] == {"clusterName": "ml-training-prod", "interruptionQueue": "ml-training-prod-karpenter"}
    assert values["nodeSelector"] == {"node.slurm-eks.io/role": "system"} and values["replicas"] == 2
    role_arn = values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"]
    (controller_role,) = [r for r in plan.of_type("aws:iam/role:Role") if r.name == "karpenter-controller"]
    trust = json.loads(controller_role.inputs["assumeRolePolicy"])["Statement"][0]
    assert role_arn.endswith("/karpenter-controller") and trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    (sub,) = [v for k, v in trust["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert sub == "system:serviceaccount:kube-system:karpenter"


def test_controller_policy_is_scoped_to_the_cluster() -> None:
    policy_resource = one(shipped_plan("prod"), "aws:iam/rolePolicy:RolePolicy", "karpenter-controller")
    policy = json.loads(policy_resource.inputs["policy"])
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert statements["AllowPassingInstanceRole"]["Resource"].endswith(":role/karpenter-node")
    deletion = statements["AllowScopedDeletion"]["Condition"]["StringEquals"]
    assert deletion == {"aws:ResourceTag/kubernetes.io/cluster/ml-training-prod": "owned"}
    assert statements["AllowAPIServerEndpointDiscovery"]["Resource"].endswith(":cluster/ml-training-prod")


def test_node_role_has_an_ec2_linux_access_entry_and_nodes_find_the_cluster_sg() -> None:
    plan = shipped_plan("prod")
    entry = one(plan, "aws:eks/accessEntry:AccessEntry").inputs
    assert entry["type"] == "EC2_LINUX" and entry["principalArn"].endswith(":role/karpenter-node")
    assert entry["clusterName"] == "ml-training-prod"
    tag = one(plan, "aws:ec2/tag:Tag").inputs
    assert tag["key"] == "karpenter.sh/discovery" and tag["value"] == "ml-training-prod"
    assert tag["resourceId"].startswith("sg-")  # the EKS-created cluster security group
