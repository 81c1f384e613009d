"""The gates before `pulumi preview/up`, in order, each a list of findings: the stack's config (every rule, and a KMS
secrets provider), the deploy check and the policy pack on one offline plan (made once, shared by both), and
preflight against the account. A gate with an error stops the hand-over; the later gates still say what they find,
except those that need what failed (no plan without a valid config, no preflight without credentials)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from components.config.cluster import ClusterConfig
from components.config.problems import ConfigError
from components.config.stack_secrets import secrets_provider_problems
from components.config.stackfile import load_stack, stack_file
from components.findings import Finding, errors
from scripts.offline.plan_model import Plan


@dataclass
class Gate:
    """One gate's verdict: `findings` (errors block), or `skipped` with the reason it could not run."""

    name: str
    findings: list[Finding] = field(default_factory=list)
    skipped: str = ""

    @property
    def passed(self) -> bool:
        return not self.skipped and not errors(self.findings)

    def line(self) -> str:
        if self.skipped:
            return f"{self.name}: not run ({self.skipped})"
        blocking = len(errors(self.findings))
        warnings = len(self.findings) - blocking
        return f"{self.name}: {'passed' if not blocking else f'{blocking} error(s)'}" + (
            f", {warnings} warning(s)" if warnings else "")


@dataclass
class GateRun:
    gates: list[Gate]
    plan: Plan | None
    policy_config: Path | None = None  # the pack's config file for the stack, handed to Pulumi too
    config: ClusterConfig | None = None

    @property
    def passed(self) -> bool:
        return all(g.passed for g in self.gates)


def _preflight(config: ClusterConfig, profile: str | None) -> Gate:
    from scripts.preflight.checks import CHECKS  # boto3: only when this gate runs
    from scripts.preflight.runner import AwsUnavailable, open_session, run_checks

    try:
        session, _identity = open_session(config.region, profile)
    except AwsUnavailable as exc:
        return Gate("preflight", skipped=str(exc))
    return Gate("preflight", run_checks(session, config, CHECKS))


def run_gates(stack: str, stacks_dir: Path, policy_config: Path | None = None, profile: str | None = None,
              preflight: bool = True, on_gate: Callable[[str], None] | None = None) -> GateRun:
    """Every gate of `stack`; `on_gate` hears each gate's name as it starts (the plan takes seconds)."""
    from scripts.checks import deploy
    from scripts.checks import policy as policy_check
    from scripts.offline.plan import run_plan

    say = on_gate or (lambda _name: None)
    say("validate")
    try:
        config, warnings = load_stack(stack, stacks_dir)
    except ConfigError as exc:
        return GateRun([Gate("validate", exc.findings)], None)
    validate = Gate("validate", warnings + secrets_provider_problems(stack_file(stack, stacks_dir)))
    say("plan (offline, for the deploy check and the policy pack)")
    plan, _ = run_plan(stack, stacks_dir)
    say("deploy check")
    check = Gate("deploy check", deploy.check_plan(plan, config))
    say("policy pack")
    pack = policy_check.pack_config(stack, policy_config)
    policy = Gate("policy pack", policy_check.check_plan(plan, pack))
    gates = [validate, check, policy]
    if preflight:
        say("preflight (the AWS account, read-only)")
        gates.append(_preflight(config, profile))
    return GateRun(gates, plan, pack.source, config)


def protected(plan: Plan) -> list[str]:
    """What `pulumi destroy --exclude-protected` leaves: the protected resources, as type and name."""
    return sorted(f"{r.type} {r.name}" + (" (retained even if removed from the program)" if r.retain_on_delete else "")
                  for r in plan.resources if r.protect)
