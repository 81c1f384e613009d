"""`slurm-eks preview|up|destroy --stack S`: the gates (scripts/lifecycle/gates.py), then Pulumi. A stack that
fails a gate never reaches Pulumi; `up` and `preview` run the policy pack inside Pulumi too (`--policy-pack`), so
it binds the real deployment, not only the offline plan. Registered by scripts/cli/main.py.

Exit status: Pulumi's own once handed over; 1 a gate failed (nothing was deployed); 2 bad input or no `pulumi`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from components.config.stackfile import STACKS_DIR
from scripts.cli.problems import CONFIG_ERROR_EXIT, print_findings

if TYPE_CHECKING:
    from components.config.cluster import ClusterConfig

StackOpt = Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")]
StacksDirOpt = Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")]
PolicyConfigOpt = Annotated[Path | None, typer.Option(
    help="the policy pack's config [default: policy/config/<stack>.json if it exists]")]
ProfileOpt = Annotated[str | None, typer.Option(help="AWS profile for preflight (default: the credential chain)")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="no prompts: Pulumi's --yes and --non-interactive")]


def _console() -> Console:
    return Console(stderr=True, highlight=False)  # per run: this run's COLUMNS and NO_COLOR


DeployedOpt = Annotated[Path | None, typer.Option(
    help="the deployed record to compare with (a plan, or `pulumi stack output deployedConfig --json`) "
         "[default: the stack's own output, through `pulumi`]")]
ForceOpt = Annotated[list[str] | None, typer.Option(
    "--force", help="do a change its update policy refuses (a key, or a key above it: partitions.gpu); repeat")]
AllowReplaceOpt = Annotated[list[str] | None, typer.Option(
    "--allow-replace", help="let Pulumi replace or delete this stateful resource (its URN); repeat")]
ApplyNowOpt = Annotated[bool, typer.Option(
    "--apply-immediately", help="database changes now, not in the RDS maintenance window")]
DrainOpt = Annotated[float | None, typer.Option(
    "--drain", help="drain each partition the change removes and wait up to this many seconds for its jobs")]
ContextOpt = Annotated[str | None, typer.Option(help="kubeconfig context for asking the cluster (jobs, sessions)")]


@dataclass(frozen=True)
class ChangeOptions:
    deployed: Path | None = None
    force: tuple[str, ...] = ()
    allow_replace: tuple[str, ...] = ()
    apply_immediately: bool = False
    drain: float | None = None
    context: str | None = None


def _gated(action: str, stack: str, stacks_dir: Path, policy_pack_config: Path | None, profile: str | None,
           yes: bool, options: ChangeOptions) -> None:
    from components.config.deployed_record import PLAN_DIGEST_ENV
    from components.config.problems import ConfigError
    from components.config.stackfile import load_stack
    from components.slinky.accounting_db import APPLY_IMMEDIATELY_ENV
    from scripts.change.deployed import plan_digest
    from scripts.lifecycle import gates, pulumi_cli

    say = _console()
    try:  # the change first: it needs only the config, and a refused one needs no plan nor credentials
        config, _ = load_stack(stack, stacks_dir)
    except ConfigError:
        pass  # the validate gate says what is wrong
    else:
        _change_gate(action, stack, config, options)
    run = gates.run_gates(stack, stacks_dir, policy_pack_config, profile,
                          on_gate=lambda name: say.print(f"gate: {name} ...", markup=False))
    for gate in run.gates:
        print_findings(gate.findings)
        say.print(gate.line(), markup=False, style=None if gate.passed else "red")
    if not run.passed or run.config is None or run.plan is None:
        say.print(f"stack {stack}: not handed to Pulumi (`pulumi {action}` was not run); fix what the gates "
                  "report, then run again", markup=False, style="red")
        raise typer.Exit(1)
    _replacement_gate(action, stack, run.policy_config, options)
    if action == "preview":
        raise typer.Exit(0)
    env = {PLAN_DIGEST_ENV: plan_digest(run.plan.to_json()),
           **({APPLY_IMMEDIATELY_ENV: "1"} if options.apply_immediately else {})}
    _hand_over(pulumi_cli.command(action, stack, run.policy_config, yes), env)


def _change_gate(action: str, stack: str, config: ClusterConfig, options: ChangeOptions) -> None:
    """The new config against the deployed one, by update policy: refused changes stop here."""
    from scripts.change.change_gate import ChangeGateError, change_set
    from scripts.change.cluster_facts import KubectlFacts
    from scripts.change.render import render_text
    from scripts.lifecycle import pulumi_cli
    from scripts.lifecycle.deployed_output import load_record

    say = _console()
    say.print("gate: changes against the deployed config ...", markup=False)
    try:
        record = load_record(stack, options.deployed)
        result = change_set(stack, config, record, KubectlFacts(options.context), list(options.force),
                            options.drain)
    except ChangeGateError as exc:
        say.print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    except pulumi_cli.PulumiMissing as exc:
        say.print(f"error: {exc} (or give the deployed record with --deployed FILE)", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    for note in result.notes:
        say.print(note, markup=False)
    if result.source:
        typer.echo(render_text(result.changes, result.source), err=True, nl=False)
    if result.refused:
        say.print(f"stack {stack}: {len(result.refused)} change(s) refused by their update policy; `pulumi {action}` "
                  "was not run", markup=False, style="red")
        raise typer.Exit(1)


def _replacement_gate(action: str, stack: str, policy_config: Path | None, options: ChangeOptions) -> None:
    """`pulumi preview --json`: a replace or delete of a stateful resource stops here unless allowed by URN."""
    from scripts.change.replacements import PreviewUnreadable, blocked, preview_steps, render_steps
    from scripts.lifecycle import pulumi_cli

    say = _console()
    argv = pulumi_cli.preview_json_command(stack, policy_config)
    say.print("running: " + " ".join(argv), markup=False)
    try:
        status, out, err = pulumi_cli.capture(argv)
        steps = preview_steps(out)
    except pulumi_cli.PulumiMissing as exc:
        say.print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    except PreviewUnreadable as exc:
        say.print(f"error: `pulumi preview --json` gave no plan ({exc}): {err.strip()[-2000:]}", markup=False)
        raise typer.Exit(status or 1) from None
    typer.echo(render_steps(steps), err=True, nl=False)
    if status != 0:
        say.print(f"`pulumi preview` failed (exit {status}): {err.strip()[-2000:]}", markup=False)
        raise typer.Exit(status)
    stopped = blocked(steps, list(options.allow_replace))
    if stopped:
        for step in stopped:
            say.print(f"refused: {step.op} of stateful {step.type} {step.urn}" + (
                f" (because {', '.join(step.reasons)})" if step.reasons else "") +
                f"; give --allow-replace '{step.urn}' if that is meant", markup=False, style="red")
        say.print(f"stack {stack}: `pulumi {action}` was not run", markup=False, style="red")
        raise typer.Exit(1)


def _hand_over(argv: list[str], env: dict[str, str] | None = None) -> None:
    from scripts.lifecycle import pulumi_cli

    _console().print("running: " + " ".join(argv), markup=False)
    try:
        status = pulumi_cli.run(argv, env)
    except pulumi_cli.PulumiMissing as exc:
        _console().print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    raise typer.Exit(status)


def preview(stack: StackOpt, stacks_dir: StacksDirOpt = STACKS_DIR, policy_pack_config: PolicyConfigOpt = None,
            profile: ProfileOpt = None, deployed: DeployedOpt = None, force: ForceOpt = None,
            allow_replace: AllowReplaceOpt = None, context: ContextOpt = None) -> None:
    """Run every gate (validate, deploy check, policy pack, preflight), compare the config with the deployed one
    by update policy, then `pulumi preview --json` with the pack: what each change does, and any replacement or
    deletion of a stateful resource."""
    _gated("preview", stack, stacks_dir, policy_pack_config, profile, False, ChangeOptions(
        deployed, tuple(force or ()), tuple(allow_replace or ()), context=context))


def up(stack: StackOpt, stacks_dir: StacksDirOpt = STACKS_DIR, policy_pack_config: PolicyConfigOpt = None,
       profile: ProfileOpt = None, yes: YesOpt = False, deployed: DeployedOpt = None, force: ForceOpt = None,
       allow_replace: AllowReplaceOpt = None, apply_immediately: ApplyNowOpt = False, drain: DrainOpt = None,
       context: ContextOpt = None) -> None:
    """Run every gate, refuse a change its update policy does not allow (unless named in --force) and any
    replacement or deletion of a stateful resource (unless --allow-replace URN), then `pulumi up` with the pack."""
    _gated("up", stack, stacks_dir, policy_pack_config, profile, yes, ChangeOptions(
        deployed, tuple(force or ()), tuple(allow_replace or ()), apply_immediately, drain, context))


def changes(stack: StackOpt, stacks_dir: StacksDirOpt = STACKS_DIR, deployed: DeployedOpt = None,
            force: ForceOpt = None, allow_replace: AllowReplaceOpt = None, context: ContextOpt = None) -> None:
    """Only the day-two gates of `up`: the config against the deployed one by update policy, then `pulumi preview
    --json` for replacements of stateful resources; exit 1 when one is refused. The deploy workflow runs it before
    its `pulumi up` (.github/actions/pulumi-up)."""
    from components.config.problems import ConfigError
    from components.config.stackfile import load_stack
    from scripts.cli.problems import fail_config

    try:
        config, _ = load_stack(stack, stacks_dir)
    except ConfigError as exc:
        raise fail_config(exc) from None
    options = ChangeOptions(deployed, tuple(force or ()), tuple(allow_replace or ()), context=context)
    _change_gate("up", stack, config, options)
    _replacement_gate("up", stack, policy_config_for(stack), options)
    _console().print(f"stack {stack}: no change refused", markup=False)


def policy_config_for(stack: str) -> Path | None:
    """policy/config/<stack>.json when the stack has one (what `up` hands to Pulumi too)."""
    from scripts.lifecycle.pulumi_cli import POLICY_PACK

    path = POLICY_PACK / "config" / f"{stack}.json"
    return path if path.exists() else None


def destroy(stack: StackOpt, stacks_dir: StacksDirOpt = STACKS_DIR, yes: YesOpt = False) -> None:
    """`pulumi destroy --exclude-protected`, after saying which protected resources stay (the EKS cluster, the
    accounting database, the model cache) and how to remove them."""
    from components.config.problems import ConfigError
    from scripts.cli.problems import fail_config
    from scripts.lifecycle import gates, pulumi_cli
    from scripts.offline.plan import run_plan

    try:
        plan, _ = run_plan(stack, stacks_dir)
    except ConfigError as exc:
        raise fail_config(exc) from None
    kept = gates.protected(plan)
    say = _console()
    if kept:
        say.print(f"these {len(kept)} protected resources stay (pulumi destroy --exclude-protected); remove one "
                  "with `pulumi state unprotect <URN>` first, then destroy again:", markup=False)
        for resource in kept:
            say.print(f"  {resource}", markup=False)
    _hand_over(pulumi_cli.command("destroy", stack, yes=yes))


def init(
    name: Annotated[str, typer.Argument(help="the new stack's name: stacks/Pulumi.<name>.yaml")],
    from_stack: Annotated[str, typer.Option("--from", help="the stack whose settings to start from")] = "dev",
    stacks_dir: StacksDirOpt = STACKS_DIR,
) -> None:
    """Write stacks/Pulumi.NAME.yaml from another stack's file (its settings and comments; the secrets key alias,
    clusterName and tags.environment renamed, every S3 location moved to a prefix of NAME's own), then validate it.
    Never overwrites a stack."""
    import os
    import tempfile

    from components.config.problems import ConfigError
    from components.config.stackfile import load_stack, stack_file
    from scripts.cli.problems import fail_config
    from scripts.lifecycle.new_stack import NewStackError, check_name, new_stack

    say = _console()
    try:
        check_name(name)
        target = stack_file(name, stacks_dir)
        source = stack_file(from_stack, stacks_dir)
        if target.exists():
            raise NewStackError(f"{target} exists: choose another name, or edit that file")
        if not source.exists():
            raise NewStackError(f"--from {from_stack}: no {source}; use a stack of {stacks_dir}")
        text, moves = new_stack(name, from_stack, source.read_text())
    except ConfigError as exc:
        raise fail_config(exc) from None
    except NewStackError as exc:
        say.print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    handle, temporary = tempfile.mkstemp(prefix=f".Pulumi.{name}.", suffix=".yaml", dir=stacks_dir)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    os.replace(temporary, target)  # whole or not at all
    if moves:
        say.print(f"moved {len(moves)} S3 location(s) of {from_stack} to prefixes of {name}'s own (create them, and "
                  f"copy any data {name} needs):", markup=False)
        for move in moves:
            say.print(f"  {move}", markup=False)
    try:
        config, warnings = load_stack(name, stacks_dir)
    except ConfigError as exc:
        say.print(f"wrote {target}, which does not validate yet:", markup=False)
        raise fail_config(exc) from None
    print_findings(warnings)
    say.print(f"wrote {target} (from {from_stack}; {len(config.partitions)} partition(s)): valid. Review it, create "
              f"its KMS key alias/slurm-eks-{name}-pulumi, then `slurm-eks preview --stack {name}`", markup=False)


def login(
    stack: StackOpt,
    user: Annotated[str | None, typer.Option("--user", "-u", help="a declared person (default: $USER)")] = None,
    context: Annotated[str | None, typer.Option(help="kubeconfig context (default: the current one)")] = None,
    stacks_dir: StacksDirOpt = STACKS_DIR,
) -> None:
    """ssh to the stack's login pods, as a person the stack declares: the Service from the plan, its address from
    the cluster (your kubeconfig)."""
    import getpass
    import os

    from components.config.problems import ConfigError
    from components.config.stackfile import load_stack
    from scripts.cli.problems import fail_config
    from scripts.lifecycle.login import LoginError, login_target, service_address, ssh_argv
    from scripts.offline.plan import run_plan

    who = user or getpass.getuser()
    try:
        config, _ = load_stack(stack, stacks_dir)
        people = sorted(config.slurm.identity.users)
        if who not in people:
            raise LoginError(f"{who} is not a person stack {stack} declares (slurm.identity.users: "
                             f"{', '.join(people) or 'none'}); give --user NAME")
        plan, _ = run_plan(stack, stacks_dir)
        target = login_target(plan)
        argv = ssh_argv(who, service_address(target, context), target.port)
    except ConfigError as exc:
        raise fail_config(exc) from None
    except LoginError as exc:
        _console().print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    _console().print("running: " + " ".join(argv), markup=False)
    os.execvp(argv[0], argv)
