"""Render an sbatch script for a partition: the right GPUs, EFA/NCCL or Neuron settings, and requeue logic.

Runs on the login pod: it reads the stack config (pydantic) and the instance catalog, never Pulumi.
"""

from __future__ import annotations

import difflib
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import TypeAdapter, ValidationError

from components import catalog
from components.config import ClusterConfig, SlurmTime
from components.slinky.images import training_image

TEMPLATES = Path(__file__).resolve().parent / "templates"
SHARED = "/shared"
DEFAULT_SIGNAL_LEAD_S = 300  # time to finish a step and write a checkpoint before the time limit
DEFAULT_MAX_REQUEUES = 3
DEFAULT_TORCHRUN_RESTARTS = 2  # a crashed worker is restarted (from the newest checkpoint) this often
_SLURM_TIME = TypeAdapter(SlurmTime)  # the partitions' maxTime rule, so --time accepts what Slurm accepts


class RenderError(ValueError):
    """A render request that cannot produce a correct script; the message says what to change."""


@dataclass(frozen=True)
class JobTarget:
    """What a job script needs to know about where it runs."""

    partition: str
    description: str
    template: str  # "nvidia" or "neuron"
    gpus_per_node: int
    procs_per_node: int  # torchrun workers per node: GPUs, NeuronCores, or CPU processes
    cpus_per_node: int
    efa: bool
    efa_rdma: bool
    backend: str  # "nccl" on GPUs, "gloo" on the local CPU cluster (the Neuron template ignores it)
    image: str | None  # container image for the steps (pyxis); None runs on the host
    torchrun: str
    shared_root: str
    logs_dir: str
    checkpoint_root: str
    stack: str | None = None


def target_for_partition(
    config: ClusterConfig, stack: str, name: str, image: str | None = None, container: bool = True
) -> JobTarget:
    if name not in config.partitions:
        close = difflib.get_close_matches(name, list(config.partitions), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise RenderError(f"stack {stack} has no partition {name!r}; {hint}partitions: {', '.join(config.partitions)}")
    partition = config.partitions[name]
    it = catalog.lookup(partition.instance_types[0])
    image = image or training_image(partition)
    if container and not image:
        raise RenderError(
            f"partition {name} has no training image: pass --image IMAGE, or --no-container to run on the host image"
        )
    efa = partition.efa and it.has_efa
    neuron = it.accelerator == "neuron"
    types = " or ".join(partition.instance_types)
    devices = f"{it.accelerators} x {it.accelerator_model}" if it.accelerators else "no accelerator"
    return JobTarget(
        partition=name,
        description=f"partition {name}: {types}, {devices} per node"
        + (f", {min(catalog.lookup(t).efa_interfaces for t in partition.instance_types)} EFA" if efa else ", no EFA"),
        template="neuron" if neuron else "nvidia",
        gpus_per_node=it.accelerators if it.accelerator == "nvidia" else 0,
        procs_per_node=it.neuron_cores if neuron else max(it.accelerators, 1),
        cpus_per_node=it.vcpu,
        efa=efa,
        efa_rdma=efa and it.efa_rdma,
        backend="nccl",
        image=(image or training_image(partition)) if container else None,
        torchrun="torchrun",
        shared_root=SHARED,
        logs_dir=f"{SHARED}/logs",
        checkpoint_root=f"{SHARED}/checkpoints",
        stack=stack,
    )


def local_target(state_dir: Path, cpus: int, gpus: int) -> JobTarget:
    """The single-machine Slurm of `slurm-eks local up`: partition cpu, fake GPUs, gloo on the host."""
    torchrun = Path(sys.executable).parent / "torchrun"
    return JobTarget(
        partition="cpu",
        description=f"local partition cpu: {cpus} CPUs, {gpus} fake GPUs, gloo on the host",
        template="nvidia",
        gpus_per_node=gpus,
        procs_per_node=max(gpus, 1),
        cpus_per_node=cpus,
        efa=False,
        efa_rdma=False,
        backend="gloo",
        image=None,
        torchrun=str(torchrun),
        shared_root=str(state_dir),
        logs_dir=str(state_dir / "logs"),
        checkpoint_root=str(state_dir / "checkpoints"),
    )


def render_job(
    target: JobTarget,
    entry: list[str],
    nodes: int = 1,
    time: str = "UNLIMITED",
    job_name: str | None = None,
    signal_lead: int = DEFAULT_SIGNAL_LEAD_S,
    max_requeues: int = DEFAULT_MAX_REQUEUES,
    torchrun_restarts: int = DEFAULT_TORCHRUN_RESTARTS,
    precompile_args: str = "--steps 10",
) -> str:
    if not entry:
        raise RenderError("no entry point: put it after `--`, e.g. `-- jobs/train.py --steps 1000`")
    if nodes < 1:
        raise RenderError(f"--nodes must be at least 1, not {nodes}")
    try:
        _SLURM_TIME.validate_python(time)
    except ValidationError:
        raise RenderError(
            f"--time {time!r} is not a Slurm time limit; use minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED"
        ) from None
    name = job_name or re.sub(r"[^A-Za-z0-9_.-]", "-", Path(entry[0]).stem) or "train"
    container = ""
    if target.image:
        container = (
            f"--container-image={shlex.quote(target.image)} "
            f"--container-mounts={target.shared_root}:{target.shared_root} "
            '--container-workdir="${PWD}" '
        )
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    return env.get_template(f"{target.template}.sbatch.j2").render(
        t=target,
        nodes=nodes,
        time=time,
        job_name=name,
        signal_lead=signal_lead,
        max_requeues=max_requeues,
        torchrun_restarts=torchrun_restarts,
        torchrun=shlex.quote(target.torchrun),
        container_flags=container,
        entry=" ".join(shlex.quote(a) for a in entry),
        precompile_args=precompile_args,
    )
