"""The NCCL/EFA (or Neuron) environment of the sbatch templates, read from the templates themselves: the
`environment` block of jobs/templates/<kind>.sbatch.j2 rendered for a pool, its `export NAME=VALUE` lines
parsed, and `${NAME:-default}` taken at its default. One definition for Slurm and Kubernetes jobs."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from jobs.render import TORCHRUN_SHUTDOWN_TIMEOUT_S, template_loader

EXPORT = re.compile(r"^export (?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>.*)$")
DEFAULTED = re.compile(r"^\$\{(?P<name>[A-Z_][A-Z0-9_]*):-(?P<default>.*)\}$")


@dataclass(frozen=True)
class TemplateTarget:
    """The fields of jobs.render.JobTarget the templates' environment blocks read."""

    efa: bool
    backend: str
    shared_root: str
    procs_per_node: int
    neuron_runtime: str | None = None  # Trainium: jobs/neuron_runtime.py


def template_environment(template: str, target: TemplateTarget) -> dict[str, str]:
    """`template` is "nvidia" or "neuron" (jobs/templates/<template>.sbatch.j2)."""
    jinja = template_loader().get_template(f"{template}.sbatch.j2")
    context = jinja.new_context({"t": target, "shutdown_timeout": TORCHRUN_SHUTDOWN_TIMEOUT_S})
    text = "".join(jinja.blocks["environment"](context))
    found: dict[str, str] = {}
    for line in text.splitlines():
        if m := EXPORT.match(line.strip()):
            value = " ".join(shlex.split(m["value"]))
            if d := DEFAULTED.match(value):
                value = d["default"]
            found[m["name"]] = value
    return found
