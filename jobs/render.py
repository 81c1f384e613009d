"""Render an sbatch script for a partition: the right GPUs, EFA/NCCL or Neuron settings, and requeue logic.

Runs on the login pod: it reads the stack config (pydantic) and the instance catalog, never Pulumi.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import TypeAdapter, ValidationError

from components import catalog
from components.config.base import SlurmTime
from components.config.cluster import ClusterConfig, Fsx
from components.slinky.images import training_image
from components.slinky.sizing import slurm_cpus
from jobs.neuron_runtime import WHAT, NeuronRuntime, NeuronRuntimeError, check_runtime, default_runtime
from jobs.training.cadence import RECIPE_STOP_CHECK_EVERY, RECIPES, STOP_CHECK_SECONDS, stop_wait_seconds

TEMPLATES = Path(__file__).resolve().parent / "templates"
SHARED = "/shared"
# Time to finish a step and write a small checkpoint before the time limit, when nothing else is known. A
# stop request first waits for the ranks' next agreement (jobs/training/cadence.py): about 10 s, or one step
# when a step is longer, or `--stop-check-every` steps. With `--step-seconds` the lead is that wait plus this
# (then the margin to save and exit), and an explicit `--signal-lead` shorter than the wait is refused.
DEFAULT_SIGNAL_LEAD_S = 300
CHECKPOINT_WRITE_SAFETY = 2  # /shared is shared with every other job's I/O; FSx's figures are baselines
MAX_SIGNAL_LEAD_S = 65535  # sbatch(1) --signal: "sig_time must have an integer value between 0 and 65535"
DEFAULT_MAX_REQUEUES = 3
DEFAULT_TORCHRUN_RESTARTS = 2  # a crashed worker is restarted (from the newest checkpoint) this often
# Slurm's KillWait, the seconds between SIGTERM and SIGKILL at the time limit or on scancel: 30 by default
# (slurm.conf(5)), and neither components/slinky/slurm_conf.py nor the Slinky operator's slurm.conf
# (slurm-operator internal/builder/controllerbuilder/controller_config.go buildSlurmConf) sets it.
SLURM_KILL_WAIT_S = 30
# torchrun gives its workers this long after forwarding SIGTERM, then SIGKILLs them and exits: inside
# KillWait, so torchrun (not Slurm) ends the step and a checkpoint in flight gets nearly all of it.
TORCHRUN_SHUTDOWN_TIMEOUT_S = SLURM_KILL_WAIT_S - 5
# torchrun prefixes each worker's lines with this (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, torch/distributed/
# run.py; `${rank}` is the global rank: torch/distributed/elastic/agent/server/local_elastic_agent.py), in
# torch 2.13 and 2.9 alike, when it tees the workers' output (--tee).
RANK_PREFIX = "[${rank}]: "
# Disk throughput a checkpoint write gets on SCRATCH_2, MB/s per TiB (PERSISTENT_2's is its per-unit
# throughput): AWS FSx for Lustre User Guide, "Performance characteristics of SSD and HDD storage classes"
# (docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html), disk throughput 200 read / 100 write.
SCRATCH_2_WRITE_MB_S_PER_TIB = 100
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
    # What the one task per node asks (--cpus-per-task): every CPU Slurm schedules on the node, which on a
    # partition is the slurmd pod's limit through Slinky's CoreSpecCount (components/slinky/sizing.py
    # slurm_cpus), never the instance's vCPUs: a request above it would pend forever.
    cpus_per_node: int
    efa: bool
    backend: str  # "nccl" on GPUs, "gloo" on the local CPU cluster (the Neuron template ignores it)
    image: str | None  # container image for the steps (pyxis); None runs on the host
    torchrun: str
    shared_root: str
    logs_dir: str
    checkpoint_root: str
    stack: str | None = None
    max_nodes: int | None = None  # the partition's maxNodes; None: no limit known (the local cluster)
    # The partition's maxTime: a longer --time pends forever, reason PartitionTimeLimit ("The job's time limit exceeds
    # its partition's current time limit", squeue(1) of Slurm 25.11).
    max_time: str | None = None
    # Trainium only: TorchNeuron ("native") or the legacy torch-xla path (jobs/neuron_runtime.py)
    neuron_runtime: NeuronRuntime | None = None
    checkpoint_write_mb_s: float | None = None  # what /shared writes a checkpoint at; None: unknown


@dataclass(frozen=True)
class SignalLead:
    """Seconds before the time limit that Slurm sends USR2, and how they were reached."""

    seconds: int
    formula: str = ""  # set when derived from a checkpoint size, for the script and the CLI


DEFAULT_LEAD = SignalLead(DEFAULT_SIGNAL_LEAD_S)


@dataclass(frozen=True)
class ContainerImage:
    """A step image as pyxis gets it: one squashfs file on /shared and a container name per image."""

    reference: str  # as configured or given with --image
    uri: str | None  # what `enroot import` pulls; None when the reference is already a squashfs file
    # The image cache: each user's imports go into <cache>/<user>/<name>.sqsh, a directory only they can write
    # (templates/own_directory.sh), so nobody's job starts from a file another user made. None with `uri`.
    cache: str | None
    name: str  # pyxis --container-name, and the file's name in the cache

    def file(self, user: str) -> str:
        """The squashfs file `user`'s steps start from."""
        return f"{self.cache}/{user}/{self.name}.sqsh" if self.cache else self.reference


def fsx_write_mb_s(fsx: Fsx) -> float:
    """Baseline disk throughput of the file system, MB/s: per-TiB throughput x capacity in TiB (the FSx API's
    PerUnitStorageThroughput: "File system throughput capacity is equal to Storage capacity (TiB) *
    PerUnitStorageThroughput (MB/s/TiB)")."""
    if fsx.deployment_type == "SCRATCH_2" or fsx.throughput_per_tib is None:
        return SCRATCH_2_WRITE_MB_S_PER_TIB * fsx.capacity_gib / 1024
    return fsx.throughput_per_tib * fsx.capacity_gib / 1024


def target_for_partition(
    config: ClusterConfig, stack: str, name: str, image: str | None = None, container: bool = True,
    neuron_runtime: str | None = None,
) -> JobTarget:
    if name not in config.partitions:
        close = difflib.get_close_matches(name, list(config.partitions), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise RenderError(f"stack {stack} has no partition {name!r}; {hint}partitions: {', '.join(config.partitions)}")
    partition = config.partitions[name]
    it = catalog.lookup(partition.instance_types[0])
    neuron = it.accelerator == "neuron"
    runtime = _neuron_runtime(image or partition.image, it.accelerator_model, name, neuron_runtime) if neuron else None
    image = image or (training_image(partition) if runtime != "native" else partition.image)
    if container and not image:
        if runtime == "native":
            raise RenderError(
                f"partition {name} trains through {WHAT['native']}, and no image of it is pinned here: AWS publishes "
                "it as the 'PyTorch Training (TorchNeuron)' DLC of Neuron 2.33 and later (github.com/aws-neuron/"
                "deep-learning-containers), whose tag could not be verified offline. Set "
                f"partitions.{name}.image in stacks/Pulumi.{stack}.yaml (or pass --image IMAGE), or --neuron-runtime "
                "xla for the legacy torch-xla image"
            )
        raise RenderError(
            f"partition {name} has no training image: pass --image IMAGE, or --no-container to run on the host image"
        )
    efa = partition.efa and it.has_efa
    types = " or ".join(partition.instance_types)
    devices = f"{it.accelerators} x {it.accelerator_model}" if it.accelerators else "no accelerator"
    return JobTarget(
        partition=name,
        description=f"partition {name}: {types}, {devices} per node"
        + (f", {min(catalog.lookup(t).efa_interfaces for t in partition.instance_types)} EFA" if efa else ", no EFA"),
        template="neuron" if neuron else "nvidia",
        gpus_per_node=it.accelerators if it.accelerator == "nvidia" else 0,
        procs_per_node=it.neuron_cores if neuron else max(it.accelerators, 1),
        cpus_per_node=slurm_cpus(partition),
        efa=efa,
        backend="nccl",
        image=image if container else None,
        torchrun="torchrun",
        shared_root=SHARED,
        # One directory per person, made private by the login pod's identity setup (components/slinky/files/
        # identity-setup.sh): nobody reads another's job output. %u is Slurm's user-name pattern (sbatch(1)
        # "filename pattern"); Slurm opens the file as the job's user before the script runs.
        logs_dir=f"{SHARED}/logs/%u",
        checkpoint_root=f"{SHARED}/checkpoints",
        stack=stack,
        max_nodes=partition.max_nodes,
        max_time=partition.max_time,
        checkpoint_write_mb_s=fsx_write_mb_s(config.storage.fsx),
        neuron_runtime=runtime,
    )


def _neuron_runtime(image: str | None, chip: str, partition: str, asked: str | None) -> NeuronRuntime:
    """The runtime asked for, if the chips run it; else the partition's default (jobs/neuron_runtime.py)."""
    if asked is None:
        return default_runtime(chip, image)
    try:
        return check_runtime(asked, chip, f"partition {partition}")
    except NeuronRuntimeError as error:
        raise RenderError(str(error)) from None


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
        backend="gloo",
        image=None,
        torchrun=str(torchrun),
        shared_root=str(state_dir),
        logs_dir=str(state_dir / "logs"),
        checkpoint_root=str(state_dir / "checkpoints"),
    )


def enroot_uri(reference: str) -> str:
    """A Docker reference as `enroot import` takes it: docker://[REGISTRY#]IMAGE[:TAG] (NVIDIA/enroot
    doc/cmd/import.md). The first path component is a registry when it contains '.' or ':', is 'localhost',
    or is not lowercase: Docker's own rule (distribution/reference normalize.go splitDockerDomain)."""
    ref = reference.removeprefix("docker://")
    first, slash, rest = ref.partition("/")
    is_registry = first == "localhost" or any(c in first for c in ".:") or first != first.lower()
    if "#" in ref or not slash or not is_registry:
        return f"docker://{ref}"
    return f"docker://{first}#{rest}"


def container_image(reference: str, shared_root: str) -> ContainerImage:
    """Where the image lives on /shared: in the user's own cache directory, under a name made of the reference
    itself (enroot's own naming turns '/' into '+'), so another tag or registry is another file and another
    container. Never one file for everyone: whoever imported it first would own what every later job runs."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "+", reference.removeprefix("docker://")).strip("+.")
    if reference.startswith(("/", ".")):  # pyxis takes a reference starting so as a squashfs path (args.c)
        return ContainerImage(reference, None, None, stem.removesuffix(".sqsh"))
    return ContainerImage(reference, enroot_uri(reference), f"{shared_root}/images", stem)


def slurm_time_seconds(time: str) -> int | None:
    """A Slurm time limit in seconds (sbatch(1) --time formats); None when there is none (UNLIMITED, 0)."""
    if time.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, _, clock = time.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = [*parts, 0, 0][:3]
        total = int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    else:  # M, M:S, H:M:S
        scale = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}[len(parts)]
        total = sum(p * s for p, s in zip(parts, scale, strict=True))
    return total or None  # "A time limit of zero requests that no time limit be imposed"


@dataclass(frozen=True)
class StopWait:
    """The longest a stop request waits for the ranks to agree on it, and how that was reached."""

    seconds: float
    how: str  # e.g. "10 steps x 213 s: --stop-check-every 10, --step-seconds 213"
    fix: str  # what else shortens the wait ("" when nothing does)


def _is_recipe(entry: list[str]) -> bool:
    return bool(entry) and Path(entry[0]).name in RECIPES


def entry_stop_check_every(entry: list[str]) -> tuple[int | None, bool]:
    """Steps between the entry point's stop agreements and whether its flags say so: its `--stop-check-every`,
    else its default (the recipes, jobs/recipes/: every optimizer step; jobs/train.py: time-based, None)."""
    for i, arg in enumerate(entry[1:], start=1):
        value = arg.removeprefix("--stop-check-every=") if arg.startswith("--stop-check-every=") else (
            entry[i + 1] if arg == "--stop-check-every" and i + 1 < len(entry) else None)
        if value is not None:
            try:
                return int(value), True
            except ValueError:
                raise RenderError(f"--stop-check-every {value!r} is not a number of steps") from None
    return (RECIPE_STOP_CHECK_EVERY if _is_recipe(entry) else None), False


def stop_wait(entry: list[str], step_seconds: float) -> StopWait:
    """How long a stop request can wait for the entry point's ranks to agree, at `step_seconds` a step."""
    if step_seconds <= 0:
        raise RenderError(f"--step-seconds {step_seconds:g} is not a duration; give one training step's seconds")
    every, given = entry_stop_check_every(entry)
    seconds = stop_wait_seconds(step_seconds, every)
    fix = ""
    if every is not None and given:
        steps = f"{every} step{'s' if every > 1 else ''}"
        how = f"{steps} x {step_seconds:g} s: --stop-check-every {every}, --step-seconds {step_seconds:g}"
        if every > 1:
            fix = ("--stop-check-every 1" if _is_recipe(entry) else
                   f"drop --stop-check-every, so the ranks agree about every {STOP_CHECK_SECONDS:g} s "
                   "(at most one step)")
    elif every is not None or step_seconds > STOP_CHECK_SECONDS:
        how = f"one step: --step-seconds {step_seconds:g}, the ranks agree after each step" + (
            "" if every is not None else " this long")
    else:
        how = f"the ranks agree about every {STOP_CHECK_SECONDS:g} s: --step-seconds {step_seconds:g}"
    return StopWait(seconds, how, fix)


def checkpoint_signal_lead(target: JobTarget, checkpoint_gb: float, wait: StopWait | None = None) -> SignalLead:
    """The USR2 lead that fits the final checkpoint: the default lead (finish the step in flight), or the wait
    for the ranks' stop agreement when that is longer, plus the checkpoint's write time at the file system's
    baseline throughput, times a safety factor."""
    if checkpoint_gb <= 0:
        raise RenderError(f"--checkpoint-gb {checkpoint_gb:g} is not a size; give one checkpoint's size in GB")
    if target.checkpoint_write_mb_s is None:
        raise RenderError(
            f"--checkpoint-gb {checkpoint_gb:g}: the throughput of {target.shared_root} is unknown here; "
            "give --signal-lead SECONDS instead"
        )
    rate = target.checkpoint_write_mb_s
    base, base_how = _stop_part(wait)
    seconds = base + math.ceil(CHECKPOINT_WRITE_SAFETY * checkpoint_gb * 1000 / rate)
    formula = (f"{base_how} + {CHECKPOINT_WRITE_SAFETY} x {checkpoint_gb:g} GB / {rate:.0f} MB/s "
               f"(FSx baseline) = {seconds} s")
    return SignalLead(seconds, formula)


def _stop_part(wait: StopWait | None) -> tuple[int, str]:
    """The lead before the checkpoint's write time: DEFAULT_SIGNAL_LEAD_S, after the stop wait when known."""
    if wait is None:
        return DEFAULT_SIGNAL_LEAD_S, f"{DEFAULT_SIGNAL_LEAD_S} s"
    seconds = math.ceil(wait.seconds)
    return seconds + DEFAULT_SIGNAL_LEAD_S, f"{seconds} s to agree on the stop ({wait.how}) + {DEFAULT_SIGNAL_LEAD_S} s"


def signal_lead(target: JobTarget, entry: list[str], seconds: int | None = None, checkpoint_gb: float | None = None,
                step_seconds: float | None = None) -> SignalLead:
    """The lead from `job render`'s flags: `--signal-lead` as given (refused when it cannot even cover the wait
    for the ranks' stop agreement), or sized from `--checkpoint-gb` and `--step-seconds`, or the default."""
    if seconds is not None and checkpoint_gb is not None:
        raise RenderError(
            f"--signal-lead {seconds} and --checkpoint-gb {checkpoint_gb:g} both set the lead; give one of them"
        )
    wait = stop_wait(entry, step_seconds) if step_seconds is not None else None
    if seconds is not None:
        if wait is not None and seconds < wait.seconds:
            fix = f"; or {wait.fix}" if wait.fix else ""
            raise RenderError(
                f"--signal-lead {seconds} cannot cover the wait for the ranks to agree on a stop, "
                f"{math.ceil(wait.seconds)} s ({wait.how}), let alone the checkpoint after it: the job would reach "
                f"its time limit still training; give --signal-lead of at least {math.ceil(wait.seconds)} s plus the "
                f"checkpoint's write time (or --checkpoint-gb GB instead, which sizes the lead){fix}"
            )
        return SignalLead(seconds)
    if checkpoint_gb is not None:
        return checkpoint_signal_lead(target, checkpoint_gb, wait)
    base, base_how = _stop_part(wait)
    return SignalLead(base, f"{base_how} = {base} s" if wait is not None else "")


def precompile_key(target: JobTarget, entry: list[str]) -> str:
    """What the rendered script knows of the Neuron graphs: the entry point with its flags, the workers per
    node and the image (its compiler). The script adds the node count, NEURON_CC_FLAGS and the cache."""
    text = json.dumps({"entry": entry, "procs_per_node": target.procs_per_node, "image": target.image})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check_request(target: JobTarget, entry: list[str], nodes: int, time: str, lead: SignalLead) -> None:
    if not entry:
        raise RenderError("no entry point: put it after `--`, e.g. `-- jobs/train.py --steps 1000`")
    if nodes < 1:
        raise RenderError(f"--nodes must be at least 1, not {nodes}")
    if target.max_nodes is not None and nodes > target.max_nodes:
        where = f" in stack {target.stack}" if target.stack else ""
        raise RenderError(
            f"--nodes {nodes} is more than partition {target.partition} can have "
            f"(partitions.{target.partition}.maxNodes = {target.max_nodes}{where}); "
            f"use --nodes {target.max_nodes} or fewer, or raise maxNodes"
        )
    try:
        _SLURM_TIME.validate_python(time)
    except ValidationError:
        raise RenderError(
            f"--time {time!r} is not a Slurm time limit; use minutes, HH:MM:SS, D-HH:MM:SS or UNLIMITED"
        ) from None
    limit = slurm_time_seconds(time)
    most = slurm_time_seconds(target.max_time) if target.max_time else None
    if most is not None and (limit is None or limit > most):
        where = f" in stack {target.stack}" if target.stack else ""
        raise RenderError(
            f"--time {time} is longer than partition {target.partition} allows (partitions.{target.partition}."
            f"maxTime = {target.max_time}{where}): Slurm would keep the job pending forever (PartitionTimeLimit); "
            f"use --time {target.max_time} or less, or raise maxTime"
        )
    how = f" ({lead.formula})" if lead.formula else ""
    if not 0 <= lead.seconds <= MAX_SIGNAL_LEAD_S:
        raise RenderError(f"signal lead {lead.seconds} s{how} is outside sbatch's 0-{MAX_SIGNAL_LEAD_S} s")
    if limit is not None and lead.seconds >= limit:
        raise RenderError(
            f"signal lead {lead.seconds} s{how} is not shorter than --time {time} ({limit} s): the job would "
            "be asked to stop as it starts; give a longer --time or a shorter lead"
        )


def template_loader() -> Environment:
    """The Jinja environment of jobs/templates (scripts/k8s reads the templates' environment blocks with it)."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = shlex.quote
    return env


def render_job(
    target: JobTarget,
    entry: list[str],
    nodes: int = 1,
    time: str | None = None,
    job_name: str | None = None,
    lead: SignalLead = DEFAULT_LEAD,
    max_requeues: int = DEFAULT_MAX_REQUEUES,
    torchrun_restarts: int = DEFAULT_TORCHRUN_RESTARTS,
) -> str:
    """The sbatch script; `time` defaults to the partition's maxTime (UNLIMITED where it has none)."""
    time = time or target.max_time or "UNLIMITED"
    _check_request(target, entry, nodes, time, lead)
    if max_requeues < 0:
        raise RenderError(f"--max-requeues {max_requeues}: give 0 (never requeue after a preemption) or more")
    name = job_name or re.sub(r"[^A-Za-z0-9_.-]", "-", Path(entry[0]).stem) or "train"
    image = container_image(target.image, target.shared_root) if target.image else None
    container = ""
    if image:
        container = (
            f'--container-image="${{SLURM_EKS_IMAGE}}" --container-name={shlex.quote(image.name)} '
            f"--container-mounts={target.shared_root}:{target.shared_root} "
            '--container-workdir="${PWD}" '
        )
    return template_loader().get_template(f"{target.template}.sbatch.j2").render(
        t=target,
        nodes=nodes,
        time=time,
        job_name=name,
        lead=lead,
        max_requeues=max_requeues,
        torchrun_restarts=torchrun_restarts,
        torchrun=shlex.quote(target.torchrun),
        image=image,
        container_flags=container,
        entry=" ".join(shlex.quote(a) for a in entry),
        precompile_key=precompile_key(target, entry),
        rank_prefix=RANK_PREFIX,
        shutdown_timeout=TORCHRUN_SHUTDOWN_TIMEOUT_S,
    )


def render_image_pull(target: JobTarget) -> str:
    """The import a job's first run does, alone: a script for bash on the login pod, or for sbatch."""
    if not target.image:
        raise RenderError(f"partition {target.partition} has no image to pull; pass --image IMAGE")
    image = container_image(target.image, target.shared_root)
    if image.uri is None:
        raise RenderError(f"--image {target.image} is already a squashfs file; there is nothing to pull")
    return template_loader().get_template("image_pull.sbatch.j2").render(t=target, image=image)
