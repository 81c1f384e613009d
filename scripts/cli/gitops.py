"""`slurm-eks gitops export --stack S DIR`: the Kubernetes side as an Argo CD app-of-apps tree (engine:
scripts/offline/gitops_export.py). Registered by scripts/cli/main.py."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from components.config.problems import ConfigError, plural
from components.config.stackfile import STACKS_DIR, load_stack, stack_file
from scripts.cli.problems import CONFIG_ERROR_EXIT, err, fail_config

gitops_app = typer.Typer(no_args_is_help=True, help="GitOps with Argo CD: export the Kubernetes side as Applications.")

README = """# {stack}: the Kubernetes side for Argo CD

Written by `slurm-eks gitops export --stack {stack}` from the offline plan; do not edit by hand, export again.
`root.yaml` is the app-of-apps root (with `gitops:` in the stack, `pulumi up` creates it and installs Argo CD).
`apps/` holds one Application per Helm chart and one per sync wave of plain manifests (`manifests/wave-N/`).

Kubernetes Secrets are not here: they stay with Pulumi (`pulumi up`), which also keeps every AWS resource, and in
gitops mode the Namespaces, NetworkPolicies and plain manifests (the root Application leaves `manifests-*` out).
Values only `pulumi up` knows are placeholders listed in UNRESOLVED.md. See docs/gitops.md.
"""


def _without_gitops(stack: str, stacks_dir: Path, tmp: Path) -> Path:
    """A copy of the stack file without `gitops`, so the plan holds the charts Argo CD will install."""
    raw = yaml.safe_load(stack_file(stack, stacks_dir).read_text())
    cluster = raw.get("config", {}).get("slurm-eks:cluster", {})
    cluster.pop("gitops", None)
    stack_file(stack, tmp).write_text(yaml.safe_dump(raw, sort_keys=False))
    return tmp


@gitops_app.command("export")
def export(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    out: Annotated[Path, typer.Argument(help="directory to write the tree into")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
    values_from: Annotated[Path | None, typer.Option(
        help="JSON of real values: `pulumi stack output --json`, or keyed by the paths UNRESOLVED.md lists",
        exists=True, dir_okay=False)] = None,
    allow_unresolved: Annotated[bool, typer.Option(help="exit 0 even with placeholders left")] = False,
    repo_url: Annotated[str | None, typer.Option(
        help="the Git repository (default: the stack's gitops.repoURL)")] = None,
) -> None:
    """Write DIR/root.yaml, DIR/apps/, DIR/manifests/ and DIR/UNRESOLVED.md; exit 1 if a value is unresolved."""
    from components.config.gitops import GitOps
    from scripts.offline.gitops_export import build_export, write_export
    from scripts.offline.plan import run_plan

    try:
        config, _ = load_stack(stack, stacks_dir)
        gitops = config.gitops or (GitOps.model_validate({"repoURL": repo_url}) if repo_url else None)
        if gitops is None:
            err.print("[red]error:[/] the stack has no `gitops:`; give --repo-url", highlight=False)
            raise typer.Exit(CONFIG_ERROR_EXIT)
        if repo_url:
            gitops = gitops.model_copy(update={"repo_url": repo_url})
        with tempfile.TemporaryDirectory() as tmp:
            plan, _ = run_plan(stack, _without_gitops(stack, stacks_dir, Path(tmp)))
    except ConfigError as exc:
        raise fail_config(exc) from None
    resolved: dict[str, Any] = json.loads(values_from.read_text()) if values_from else {}
    resolved = {k: v.get("value", v) if isinstance(v, dict) and "value" in v else v for k, v in resolved.items()}
    from components.addons.gitops import root_application

    ex = build_export(plan, gitops, resolved)
    ex.files["root.yaml"] = root_application(gitops)
    write_export(ex, out, README.format(stack=stack))
    typer.echo(f"wrote {out}: {plural(len(ex.files), 'file')}, {plural(len(ex.unresolved), 'unresolved value')}")
    if ex.unresolved and not allow_unresolved:
        err.print(f"[red]{plural(len(ex.unresolved), 'value')} only `pulumi up` knows[/]: listed in "
                  f"{out / 'UNRESOLVED.md'}; give --values-from FILE or --allow-unresolved", highlight=False)
        raise typer.Exit(1)
