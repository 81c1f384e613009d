"""The deploy check's *iam* rule: each controller's role, found by the service account its IRSA trust policy
names, is evaluated (`iam_policy`) against the requests that controller really makes (`iam_requests`).
A denied request is a finding: the role, the action, the resource, and the condition that fails.

Only the roles' inline policies are in the plan; a managed policy attached by ARN is not evaluated, but one
that must never reach a node is named: every process on a node (a pod that escapes, a login shell) can use the
node role's credentials.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from components.config.checkpoint_store import JOB_ENV_CONFIG_MAP, STORE_KEY, job_env_value
from components.findings import Finding, resource_label
from components.lifecycle.node_repair import SETTINGS_CONFIG_MAP as LIFECYCLE_SETTINGS
from scripts.checks.iam_policy import Request, UnsupportedPolicy, evaluate
from scripts.checks.iam_requests import CONTROLLERS, Controller, Facts, NodeClass
from scripts.offline.plan_model import Plan, PlannedResource

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
# AWS-managed policies no node role carries (components/aws/iam.py NODE_POLICIES), and what they would hand a node.
NOT_FOR_NODES = {
    "AmazonEKS_CNI_Policy": "ec2:ModifyNetworkInterfaceAttribute on every ENI (it can change any ENI's "
                            "security groups); the VPC CNI has a policy scoped to this cluster on its own IRSA role",
    "AmazonSSMManagedInstanceCore": "ssm:* session channels (a remote shell on the node)",
}
ISSUER_REGION = re.compile(r"oidc\.eks\.([a-z0-9-]+)\.amazonaws\.com")


@dataclass(frozen=True)
class ControllerRole:
    role: PlannedResource
    service_account: str
    provider_arn: str  # the OIDC provider it trusts: its partition, account and region are the cluster's
    policies: list[tuple[str, Mapping[str, Any]]]


def _document(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None  # unknown at plan time, or not JSON: nothing to evaluate
    return value if isinstance(value, Mapping) else None


def controller_roles(plan: Plan) -> Iterator[ControllerRole]:
    """Roles trusting one Kubernetes service account through an OIDC provider, with their inline policies."""
    policies: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for resource in plan.of_type(ROLE_POLICY):
        if (document := _document(resource.inputs.get("policy"))) is not None:
            policies.setdefault(str(resource.inputs.get("role")), []).append((resource.name, document))
    for role in plan.of_type(ROLE):
        trust = _document(role.inputs.get("assumeRolePolicy")) or {}
        for statement in trust.get("Statement", []):
            federated = (statement.get("Principal") or {}).get("Federated")
            subjects = [v for k, v in (statement.get("Condition") or {}).get("StringEquals", {}).items()
                        if k.endswith(":sub")]
            if statement.get("Effect") == "Allow" and isinstance(federated, str) and len(subjects) == 1:
                # RolePolicy.role holds the role's ID, which the mocks make its name (scripts/offline/mocks.py).
                name = str(role.inputs.get("name") or role.name)
                yield ControllerRole(role, str(subjects[0]), federated, policies.get(name, []))


def node_role_names(plan: Plan) -> set[str]:
    """Roles EC2 instances can assume: their trust names the `ec2.<dns suffix>` service."""
    names = set()
    for role in plan.of_type(ROLE):
        for statement in (_document(role.inputs.get("assumeRolePolicy")) or {}).get("Statement", []):
            services = (statement.get("Principal") or {}).get("Service") or []
            if any(str(s).startswith("ec2.") for s in (services if isinstance(services, list) else [services])):
                names.add(str(role.inputs.get("name") or role.name))
    return names


def node_credentials(plan: Plan) -> Iterator[Finding]:
    """A managed policy of NOT_FOR_NODES attached to a node role."""
    nodes = node_role_names(plan)
    for attachment in plan.of_type(ATTACHMENT):
        policy = str(attachment.inputs.get("policyArn", "")).rpartition("/")[2]
        if policy in NOT_FOR_NODES and str(attachment.inputs.get("role")) in nodes:
            yield Finding(rule="iam", severity="error", resource=resource_label(attachment.urn), urn=attachment.urn,
                          message=f"attaches {policy} to the node role {attachment.inputs.get('role')}: every process "
                          f"on those nodes would get {NOT_FOR_NODES[policy]}",
                          fix="attach only AmazonEKSWorkerNodePolicy and AmazonEC2ContainerRegistryPullOnly to node "
                          "roles (docs.aws.amazon.com/eks/latest/userguide/create-node-role.html)")


def _manifests(plan: Plan, kind: str) -> list[dict[str, Any]]:
    return [m for m in plan.manifests() if m.get("kind") == kind]


def _node_classes(plan: Plan) -> tuple[NodeClass, ...]:
    pools: dict[str, list[dict[str, Any]]] = {}
    for pool in _manifests(plan, "NodePool"):
        spec = pool.get("spec", {}).get("template", {}).get("spec", {})
        pools.setdefault(spec.get("nodeClassRef", {}).get("name", ""), []).append({
            "name": pool.get("metadata", {}).get("name", ""),
            "spot": any(r.get("key") == "karpenter.sh/capacity-type" and "spot" in r.get("values", [])
                        for r in spec.get("requirements", []))})
    classes = []
    for node_class in _manifests(plan, "EC2NodeClass"):
        name, spec = node_class.get("metadata", {}).get("name", ""), node_class.get("spec", {})
        mine = pools.get(name, [])
        classes.append(NodeClass(
            name=name, role=str(spec.get("role", "")), tags=dict(spec.get("tags") or {}),
            nodepools=tuple(p["name"] for p in mine), spot=any(p["spot"] for p in mine),
            placement_group="placementGroupSelector" in spec,
            capacity_reservations=bool(spec.get("capacityReservationSelectorTerms"))))
    return tuple(classes)


def _interruption_queue(plan: Plan) -> str | None:
    for release in plan.of_type("kubernetes:helm.sh/v3:Release"):
        queue = ((release.inputs.get("values") or {}).get("settings") or {}).get("interruptionQueue")
        if queue:
            return str(queue)
    return None


def _lifecycle_settings(plan: Plan) -> dict[str, Any] | None:
    for config_map in _manifests(plan, "ConfigMap"):
        if config_map.get("metadata", {}).get("name") == LIFECYCLE_SETTINGS:
            return json.loads((config_map.get("data") or {}).get("settings.json") or "{}")
    return None


def _mlflow_artifacts(plan: Plan) -> str | None:
    """The MLflow server's `--artifacts-destination`, from its Deployment's command (components/addons/mlflow.py)."""
    for deployment in _manifests(plan, "Deployment"):
        for container in deployment.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            command = [str(a) for a in container.get("command") or []]
            if command[:2] == ["mlflow", "server"] and "--artifacts-destination" in command[:-1]:
                return command[command.index("--artifacts-destination") + 1]
    return None


def _checkpoint_store(plan: Plan) -> str | None:
    """The store the jobs' job.env names (components/slinky/job_aws.py), if the plan gives jobs one."""
    for config_map in _manifests(plan, "ConfigMap"):
        if config_map.get("metadata", {}).get("name") == JOB_ENV_CONFIG_MAP:
            return job_env_value(str((config_map.get("data") or {}).get("job.env", "")), STORE_KEY)
    return None


def plan_facts(plan: Plan, provider_arn: str) -> Facts:
    """Partition and account from the OIDC provider's ARN, the region from its issuer host, the rest from the
    cluster, Karpenter's chart values and the EC2NodeClass and NodePool manifests."""
    _, partition, _, _, account, _ = provider_arn.split(":", 5)
    region = ISSUER_REGION.search(provider_arn)
    clusters = plan.of_type("eks:index:Cluster")
    cluster = clusters[0].inputs if clusters else {}
    return Facts(partition=partition, region=region.group(1) if region else "", account=account,
                 cluster=str(cluster.get("name", "")), kubernetes_version=str(cluster.get("version", "")),
                 vpc=str(cluster.get("vpcId", "")),
                 node_classes=_node_classes(plan), interruption_queue=_interruption_queue(plan),
                 lifecycle=_lifecycle_settings(plan), mlflow_artifacts=_mlflow_artifacts(plan),
                 checkpoint_store=_checkpoint_store(plan))


def _keys(request: Request) -> str:
    return ", ".join(request.context) or "no condition keys"


def _findings(controller: Controller, found: ControllerRole, facts: Facts) -> Iterator[Finding]:
    label = resource_label(found.role.urn)
    for call in controller.calls(facts):
        request = call.request
        try:
            decision = evaluate(found.policies, request)
        except UnsupportedPolicy as e:
            yield Finding(rule="iam", severity="warning", resource=label, urn=found.role.urn,
                          message=f"{controller.name} may not be able to {request.action} on {request.resource}: "
                          f"the check cannot evaluate {e}",
                          fix="write the policy with the operators upstream uses")
            continue
        if not decision.allowed:
            yield Finding(
                rule="iam", severity="error", resource=label, urn=found.role.urn,
                message=f"{controller.name} ({found.service_account}) is denied {request.action} on "
                f"{request.resource}: {decision.why}",
                fix=f"grant it as {controller.policy_source} does, for the request as {call.source} makes it "
                f"(carrying {_keys(request)})")


def check(plan: Plan) -> list[Finding]:
    by_account = {c.service_account: c for c in CONTROLLERS}
    findings: list[Finding] = []
    for found in controller_roles(plan):
        controller = by_account.get(found.service_account)
        if controller is not None:
            findings += _findings(controller, found, plan_facts(plan, found.provider_arn))
    findings += node_credentials(plan)
    unique = {(f.resource, f.message): f for f in findings}
    return list(unique.values())
