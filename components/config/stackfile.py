"""Read `stacks/Pulumi.<stack>.yaml` the way `pulumi` does, and validate its `slurm-eks:cluster` value."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from components.config.keys import FULL_KEY
from components.config.problems import ConfigError
from components.config.stack_context import StackContext
from components.findings import Finding

if TYPE_CHECKING:
    from components.config.cluster import ClusterConfig

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STACKS_DIR = PROJECT_ROOT / "stacks"


def stack_file(stack: str, stacks_dir: Path = STACKS_DIR) -> Path:
    """stacks_dir/Pulumi.<stack>.yaml; ConfigError when `stack` is a path (`--stack stacks/Pulumi.dev.yaml`)
    rather than a name, saying which name and directory to give."""
    if "/" in stack or stack.endswith((".yaml", ".yml")):
        given = Path(stack)
        name = given.name.removeprefix("Pulumi.").removesuffix(".yaml").removesuffix(".yml")
        elsewhere = given.parent.resolve() != stacks_dir.resolve() and str(given.parent) != "."
        where = f" --stacks-dir {given.parent}" if elsewhere else ""
        raise ConfigError([Finding(rule="stack-file", severity="error", value=stack,
                                   message="--stack takes a stack's name, not its file",
                                   fix=f"--stack {name}{where} (the file is <stacks-dir>/Pulumi.<stack>.yaml)")],
                          stack)
    return stacks_dir / f"Pulumi.{stack}.yaml"


def available_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in stacks_dir.glob("Pulumi.*.yaml"))


def read_pulumi_config(path: Path) -> dict[str, Any]:
    """The `config:` map of a stack file; ConfigError (not a traceback) when the file is missing or bad."""
    def fail(message: str, fix: str, value: Any = None) -> ConfigError:
        return ConfigError([Finding(rule="stack-file", severity="error", value=value, message=message, fix=fix)],
                           str(path))

    if not path.exists():
        stacks = available_stacks(path.parent) if path.parent.exists() else []
        asked = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        close = difflib.get_close_matches(asked, stacks, n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`? " if close else ""
        raise fail("stack file not found", f"{hint}create it, or use one of: {', '.join(stacks) or '(none)'}")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        for mark in (getattr(exc, "context_mark", None), getattr(exc, "problem_mark", None)):
            if mark is not None:  # the file's name in "in ..., line 3", not "<unicode string>"; the snippet stays
                mark.name = str(path)
        raise fail(f"not valid YAML: {exc}", "fix the YAML syntax at the line shown") from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(config, dict):
        raise fail("no `config:` mapping", f"put the settings under config: {FULL_KEY}: ...")
    return config


def cluster_value(config: dict[str, Any], source: str) -> Any:
    if FULL_KEY not in config:
        close = difflib.get_close_matches(FULL_KEY, [str(k) for k in config], n=1, cutoff=0.6)
        hint = f"rename `{close[0]}` to `{FULL_KEY}`" if close else f"add `{FULL_KEY}:` under config:"
        raise ConfigError([Finding(rule="stack-file", severity="error", value=sorted(map(str, config)),
                                   message=f"no `{FULL_KEY}` key", fix=hint)], source)
    return config[FULL_KEY]


def load_stack(stack: str, stacks_dir: Path = STACKS_DIR) -> tuple[ClusterConfig, list[Finding]]:
    path = stack_file(stack, stacks_dir)
    from components.config.validation import parse_cluster_config  # the models: not needed to find a stack file

    return parse_cluster_config(cluster_value(read_pulumi_config(path), str(path)), str(path),
                                StackContext(stack, stacks_dir))
