"""`slurm-eks preview|up|destroy --stack S`: the gates (scripts/lifecycle/gates.py), then Pulumi. A stack that
fails a gate never reaches Pulumi; `up` and `preview` run the policy pack inside Pulumi too (`--policy-pack`), so
it binds the real deployment, not only the offline plan. Registered by scripts/cli/main.py.

Exit status: Pulumi's own once handed over; 1 a gate failed (nothing was deployed); 2 bad input or no `pulumi`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from components.config.stackfile import STACKS_DIR
from scripts.cli.problems import CONFIG_ERROR_EXIT, print_findings

StackOpt = Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")]
StacksDirOpt = Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")]
PolicyConfigOpt = Annotated[Path | None, typer.Option(
    help="the policy pack's config [default: policy/config/<stack>.json if it exists]")]
ProfileOpt = Annotated[str | None, typer.Option(help="AWS profile for preflight (default: the credential chain)")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="no prompts: Pulumi's --yes and --non-interactive")]


def _console() -> Console:
    return Console(stderr=True, highlight=False)  # per run: this run's COLUMNS and NO_COLOR


def _gated(action: str, stack: str, stacks_dir: Path, policy_pack_config: Path | None, profile: str | None,
           yes: bool) -> None:
    from scripts.lifecycle import gates, pulumi_cli

    say = _console()
    run = gates.run_gates(stack, stacks_dir, policy_pack_config, profile,
                          on_gate=lambda name: say.print(f"gate: {name} ...", markup=False))
    for gate in run.gates:
        print_findings(gate.findings)
        say.print(gate.line(), markup=False, style=None if gate.passed else "red")
    if not run.passed:
        say.print(f"stack {stack}: not handed to Pulumi (`pulumi {action}` was not run); fix what the gates "
                  "report, then run again", markup=False, style="red")
        raise typer.Exit(1)
    _hand_over(pulumi_cli.command(action, stack, run.policy_config, yes))


def _hand_over(argv: list[str]) -> None:
    from scripts.lifecycle import pulumi_cli

    _console().print("running: " + " ".join(argv), markup=False)
    try:
        status = pulumi_cli.run(argv)
    except pulumi_cli.PulumiMissing as exc:
        _console().print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    raise typer.Exit(status)


def preview(stack: StackOpt, stacks_dir: StacksDirOpt = STACKS_DIR, policy_pack_config: PolicyConfigOpt = None,
            profile: ProfileOpt = None) -> None:
    """Run every gate (validate, deploy check, policy pack, preflight), then `pulumi preview` with the pack."""
    _gated("preview", stack, stacks_dir, policy_pack_config, profile, yes=False)


def up(stack: StackOpt, stacks_dir: StacksDirOpt = STACKS_DIR, policy_pack_config: PolicyConfigOpt = None,
       profile: ProfileOpt = None, yes: YesOpt = False) -> None:
    """Run every gate (validate, deploy check, policy pack, preflight), then `pulumi up` with the pack; a stack
    that fails any gate is refused."""
    _gated("up", stack, stacks_dir, policy_pack_config, profile, yes)


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
    clusterName and tags.environment renamed), then validate it. Never overwrites a stack."""
    import os
    import tempfile

    from components.config.problems import ConfigError
    from components.config.stackfile import load_stack, stack_file
    from scripts.cli.problems import fail_config
    from scripts.lifecycle.new_stack import NewStackError, check_name, new_stack_text

    say = _console()
    try:
        check_name(name)
        target = stack_file(name, stacks_dir)
        source = stack_file(from_stack, stacks_dir)
        if target.exists():
            raise NewStackError(f"{target} exists: choose another name, or edit that file")
        if not source.exists():
            raise NewStackError(f"--from {from_stack}: no {source}; use a stack of {stacks_dir}")
        text = new_stack_text(name, from_stack, source.read_text())
    except ConfigError as exc:
        raise fail_config(exc) from None
    except NewStackError as exc:
        say.print(f"error: {exc}", markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    handle, temporary = tempfile.mkstemp(prefix=f".Pulumi.{name}.", suffix=".yaml", dir=stacks_dir)
    with os.fdopen(handle, "w") as stream:
        stream.write(text)
    os.replace(temporary, target)  # whole or not at all
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
