"""The `pulumi` CLI commands `slurm-eks up|preview|destroy` hand over to, and running one. The flags are the Pulumi
CLI's (pulumi.com/docs/iac/cli/commands: pulumi_up, pulumi_preview, pulumi_destroy): `--policy-pack DIR` and
`--policy-pack-config FILE` run the pack (policy/) inside `preview` and `up`, so its mandatory policies bind the
real deployment too; `destroy --exclude-protected` destroys everything but the protected resources. The stack's
file is found through Pulumi.yaml's `stackConfigDir: stacks`."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from components.config.stackfile import PROJECT_ROOT

POLICY_PACK = PROJECT_ROOT / "policy"


class PulumiMissing(RuntimeError):
    """No `pulumi` on PATH."""


def command(action: str, stack: str, policy_config: Path | None = None, yes: bool = False) -> list[str]:
    """The pulumi argv for `action` (preview, up or destroy) on `stack`, run from the project's root."""
    argv = ["pulumi", action, "--stack", stack, "--cwd", str(PROJECT_ROOT), "--non-interactive" if yes else ""]
    if action in ("preview", "up"):
        argv += ["--policy-pack", str(POLICY_PACK)]
        if policy_config is not None:
            argv += ["--policy-pack-config", str(policy_config)]
    if action == "destroy":
        argv.append("--exclude-protected")
    if yes and action != "preview":
        argv.append("--yes")
    return [a for a in argv if a]


def run(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run the pulumi command in the foreground (its own output and prompts), with `env` added to ours; its exit
    status."""
    binary = shutil.which(argv[0])
    if binary is None:
        raise PulumiMissing("the `pulumi` CLI is not on PATH: install it (https://www.pulumi.com/docs/install/), "
                            "log in to your state backend (`pulumi login`), then run again")
    return subprocess.run([binary, *argv[1:]], env={**os.environ, **(env or {})}, check=False).returncode


def capture(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run a pulumi command for its output: exit status, stdout, stderr."""
    binary = shutil.which(argv[0])
    if binary is None:
        raise PulumiMissing("the `pulumi` CLI is not on PATH: install it (https://www.pulumi.com/docs/install/), "
                            "log in to your state backend (`pulumi login`), then run again")
    done = subprocess.run([binary, *argv[1:]], env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          check=False)
    return done.returncode, done.stdout, done.stderr


def stack_output_command(stack: str, name: str) -> list[str]:
    """`pulumi stack output NAME --json` (pulumi.com/docs/iac/cli/commands/pulumi_stack_output)."""
    return ["pulumi", "stack", "output", name, "--json", "--stack", stack, "--cwd", str(PROJECT_ROOT)]


def preview_json_command(stack: str, policy_config: Path | None = None) -> list[str]:
    """`pulumi preview --json` with the policy pack: the steps Pulumi would take, as one JSON document."""
    return [*command("preview", stack, policy_config), "--json"]
