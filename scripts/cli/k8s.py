"""`slurm-eks k8s render ray|mpijob|volcano|bionemo --pool P`: ready-to-apply Kubernetes jobs for a pool, as YAML
on stdout. Registered by scripts/cli/main.py; the objects are built in scripts/k8s/render.py."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
import yaml
from rich.markup import escape

from components.config.problems import ConfigError
from components.config.stackfile import load_stack
from scripts.cli.problems import CONFIG_ERROR_EXIT, err, fail_config


class _NoAliases(yaml.SafeDumper):
    """Each object written out in full (a shared dict would otherwise come out as &id001 anchors)."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    """A script of several lines (bionemo's command) as a YAML block, readable as the script it is."""
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_NoAliases.add_representer(str, _text)


k8s_app = typer.Typer(no_args_is_help=True,
                      help="Kubernetes jobs beside Slurm (KubeRay, MPI Operator, Volcano, BioNeMo inference).")


class Kind(StrEnum):
    ray = "ray"
    mpijob = "mpijob"
    volcano = "volcano"
    bionemo = "bionemo"


@k8s_app.command("render")
def render_command(
    kind: Annotated[Kind, typer.Argument(
        help="ray: RayCluster; mpijob: nccl-tests MPIJob; volcano: Queue + Job; bionemo: ESM-2 inference Job")],
    pool: Annotated[str, typer.Option("--pool", "-p", help="a kubernetesPools entry of the stack")],
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")] = "prod",
    workers: Annotated[int | None, typer.Option(min=1, help="nodes (one pod each); default 2, bionemo 1")] = None,
    image: Annotated[str | None, typer.Option(
        help="container image (required for mpijob: nccl-tests; bionemo: default the pinned BioNeMo image)")] = None,
    entry: Annotated[list[str] | None, typer.Argument(
        help="after --: volcano, the training script and its arguments, run by torchrun on every node; bionemo, "
             "infer_esm2's arguments (--data-path required)")] = None,
) -> None:
    """Write the objects for POOL's nodes as YAML on stdout (`kubectl apply -f -`); exit 2 on a bad request."""
    from scripts.k8s.render import K8sRenderError, render  # the node builders import Pulumi: not for --help

    try:
        config, _ = load_stack(stack)
    except ConfigError as exc:
        raise fail_config(exc) from None
    try:
        objects = render(kind.value, config, stack, pool, workers, image, entry)
    except K8sRenderError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    typer.echo(yaml.dump_all(objects, Dumper=_NoAliases, sort_keys=False), nl=False)
