"""`slurm-eks check`: will `pulumi up` give a working cluster? Every deploy rule over one offline plan.

- network: the flows the cluster needs against the security groups (scripts/checks/network.py);
- pod-network: the pod-to-pod flows needed and forbidden against the NetworkPolicies (scripts/checks/pod_flows.py);
- iam: each controller role allows what its controller really asks for (scripts/checks/iam.py);
- order: each resource created after what it needs (scripts/checks/order.py);
- eviction: slurmd pods are Guaranteed, never the kubelet's first victims (scripts/checks/eviction.py);
- pod-security: every pod is admitted by its namespace's Pod Security level and admission policies
  (scripts/checks/pod_security.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from components.config.cluster import ClusterConfig
from components.config.problems import plural
from components.config.stackfile import load_stack
from components.findings import Finding
from scripts.checks import eviction, iam, network, order, pod_flows, pod_security
from scripts.offline.plan_model import Plan

Rule = Callable[[Plan, ClusterConfig], list[Finding]]


def _plan_only(rule: Callable[[Plan], list[Finding]]) -> Rule:
    return lambda plan, _config: rule(plan)


RULES: dict[str, Rule] = {
    "network": network.check,
    "pod-network": pod_flows.check,
    "iam": _plan_only(iam.check),
    "order": _plan_only(order.check),
    "eviction": _plan_only(eviction.check),
    "pod-security": _plan_only(pod_security.check),
}


def check_plan(plan: Plan, config: ClusterConfig) -> list[Finding]:
    return [finding for rule in RULES.values() for finding in rule(plan, config)]


def check_stack(stack: str, stacks_dir: Path) -> tuple[Plan, list[Finding]]:
    """Validate and plan the stack offline (raises ConfigError for a bad config), then check the plan."""
    from scripts.offline.plan import run_plan  # imports Pulumi: only when a plan is made here

    config, _ = load_stack(stack, stacks_dir)
    plan, _ = run_plan(stack, stacks_dir)
    return plan, check_plan(plan, config)


def summary(plan: Plan, findings: list[Finding]) -> str:
    errors = sum(f.severity == "error" for f in findings)
    return (f"stack {plan.stack}: {plural(errors, 'error')} and {plural(len(findings) - errors, 'warning')} "
            f"(rules: {', '.join(RULES)}; {len(plan.resources)} resources)")
