"""Render an sbatch script for a partition: the right GPUs, EFA/NCCL or Neuron settings, and requeue logic.

Runs on the login pod: it reads the stack config (pydantic) and the instance catalog, never Pulumi.
"""

from __future__ import annotations

import dataclasses
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
from components.config.checkpoint_store import JOB_ENV_FILE, TOKEN_DIR
from components.config.cluster import ClusterConfig, Fsx
from components.names import MLFLOW_TRACKING_URI
from components.slinky.images import training_image
from components.slinky.sizing import slurm_cpus
from jobs.checkpoint_store.location import LocationError, S3Location
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
    checkpoint_sync: CheckpointSync | None = None  # the checkpoint manager; None: checkpoints stay on /shared only
    python: str = "python3"  # the image's interpreter, which runs the checkpoint manager and the evaluation
    registry_uri: str | None = None  # the cluster's MLflow (addons.mlflow), where evaluations register versions


@dataclass(frozen=True)
class CheckpointSync:
    """The checkpoint manager's settings for one job (jobs/checkpoint_store; components/config/checkpoint_store.py):
    the stack's storage.checkpointStore with the partition's and the job's changes."""

    s3: str
    interval_seconds: int
    keep: int
    compression: str  # zstd | off


def checkpoint_sync_for(config: ClusterConfig, partition: str) -> CheckpointSync | None:
    store = config.storage.checkpoint_store
    if store is None:
        return None
    own = config.partitions[partition].checkpoint_store
    return CheckpointSync(
        s3=store.s3,
        interval_seconds=(own.interval_seconds if own and own.interval_seconds else store.interval_seconds),
        keep=(own.keep if own and own.keep else store.keep),
        compression=store.compression,
    )


def with_checkpoint_sync(target: JobTarget, s3: str | None = None, interval_seconds: int | None = None,
                         keep: int | None = None, off: bool = False) -> JobTarget:  # fmt: skip
    """The target with one job's changes to its checkpoint manager (`job render --checkpoint-*`)."""
    if off:
        return dataclasses.replace(target, checkpoint_sync=None)
    sync = target.checkpoint_sync
    if s3 is not None:
        try:
            S3Location.parse(s3)  # the checkpoint manager's own reading of it
        except LocationError:
            raise RenderError(f"--checkpoint-s3 {s3}: not an S3 location; use s3://bucket/prefix") from None
    if sync is None and s3 is None:
        if interval_seconds is not None or keep is not None:
            raise RenderError("--checkpoint-sync-interval and --checkpoint-keep need a checkpoint store: set "
                              "storage.checkpointStore in the stack, or pass --checkpoint-s3 s3://bucket/prefix")
        return target
    if interval_seconds is not None and interval_seconds < 30:
        raise RenderError(f"--checkpoint-sync-interval {interval_seconds}: give 30 seconds or more")
    if keep is not None and keep < 1:
        raise RenderError(f"--checkpoint-keep {keep}: keep 1 or more (the newest is what a job resumes from)")
    base = sync or CheckpointSync(s3 or "", 300, 3, "zstd")
    return dataclasses.replace(target, checkpoint_sync=dataclasses.replace(
        base, s3=s3 or base.s3, interval_seconds=interval_seconds or base.interval_seconds, keep=keep or base.keep))


@dataclass(frozen=True)
class Evaluation:
    """The evaluation job a training job submits when it finishes (`job render --evaluate`; jobs/templates/
    evaluate.sh): jobs/evaluate.py on the newest checkpoint, with the training run's model flags."""

    job_name: str
    time: str
    entry: str  # jobs/evaluate.py beside the training entry point, quoted for the shell
    model: str  # the registered model's name
    model_flags: str  # the training entry point's flags, quoted (the model's shape comes from them)
    flags: str  # jobs/evaluate.py's own, each with a leading space


def evaluation_for(entry: list[str], job_name: str, time: str = "1:00:00", eval_data: str | None = None,
                   model: str | None = None) -> Evaluation:  # fmt: skip
    """What `--evaluate` renders for `entry`: jobs/train.py checkpoints only (their perplexity); a recipe's
    Hugging Face model is evaluated with jobs/evaluate.py --hf-model (lm-evaluation-harness) directly."""
    if not entry or Path(entry[0]).name != "train.py":
        what = entry[0] if entry else "nothing"
        raise RenderError(f"--evaluate renders the evaluation of jobs/train.py checkpoints, not of {what}: evaluate a "
                          "Hugging Face model with `python jobs/evaluate.py --hf-model DIR --tasks ...` (docs/jobs.md)")
    evaluate = str(Path(entry[0]).with_name("evaluate.py"))
    flags = f" --eval-data {shlex.quote(eval_data)}" if eval_data else ""
    return Evaluation(job_name=f"{job_name}-eval", time=time, entry=shlex.quote(evaluate), model=model or job_name,
                      model_flags=" ".join(shlex.quote(a) for a in entry[1:]), flags=flags)  # fmt: skip


def code_root(entry: list[str]) -> str:
    """The checkout the entry point comes from (the directory holding its `jobs` package), quoted for the shell:
    the job's steps import the checkpoint manager from it; the step's working directory when the entry point is
    elsewhere."""
    path = Path(entry[0]) if entry else Path()
    for parent in path.parents:
        if parent.name == "jobs":
            return shlex.quote(str(parent.parent))
    return '"${PWD}"'


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


@dataclass(frozen=True)
class BioNeMoSteps:
    """What jobs/templates/bionemo.sbatch.j2 runs in its image, as shell words (scripts/k8s/bionemo.py makes them:
    the entry point, its flags and where the weights come from are BioNeMo's, defined there once)."""

    infer: str  # one task per GPU of every node; reads "${checkpoint}" and "${SLURM_EKS_RESULTS_DIR}"
    resolve: str | None  # one task: prints the checkpoint's path; None when `checkpoint` is given
    checkpoint: str | None
    results: str | None  # the results directory asked for; None: one of the job's own, beside its checkpoints'
    cache: str  # BIONEMO_CACHE_DIR, unless the submitter exports one
    mounts: tuple[str, ...]  # directories the container sees beside the shared root (the models')


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
        checkpoint_sync=checkpoint_sync_for(config, name),
        registry_uri=MLFLOW_TRACKING_URI if config.addons.mlflow is not None else None,
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
        python=sys.executable,
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


def job_name_for(entry: list[str], job_name: str | None = None) -> str:
    """The job's name: as given, else the entry point's stem."""
    return job_name or (re.sub(r"[^A-Za-z0-9_.-]", "-", Path(entry[0]).stem) if entry else "") or "train"


def render_job(
    target: JobTarget,
    entry: list[str],
    nodes: int = 1,
    time: str | None = None,
    job_name: str | None = None,
    lead: SignalLead = DEFAULT_LEAD,
    max_requeues: int = DEFAULT_MAX_REQUEUES,
    torchrun_restarts: int = DEFAULT_TORCHRUN_RESTARTS,
    evaluate: Evaluation | None = None,
) -> str:
    """The sbatch script; `time` defaults to the partition's maxTime (UNLIMITED where it has none); with `evaluate`,
    it submits the evaluation job when training finishes."""
    time = time or target.max_time or "UNLIMITED"
    _check_request(target, entry, nodes, time, lead)
    if max_requeues < 0:
        raise RenderError(f"--max-requeues {max_requeues}: give 0 (never requeue after a preemption) or more")
    name = job_name_for(entry, job_name)
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
        sync=target.checkpoint_sync,
        job_env_file=JOB_ENV_FILE,
        store_container_flags=container.replace(
            f"--container-mounts={target.shared_root}:{target.shared_root} ",
            f"--container-mounts={target.shared_root}:{target.shared_root},{TOKEN_DIR}:{TOKEN_DIR}:ro "),
        evaluate=evaluate,
        registry=target.registry_uri,
        code_root=code_root(entry),
        rank_prefix=RANK_PREFIX,
        shutdown_timeout=TORCHRUN_SHUTDOWN_TIMEOUT_S,
    )


def environment_block(target: JobTarget) -> str:
    """The `environment` block of the target's template (NCCL and EFA, or Neuron), for scripts that do not
    extend base.sbatch.j2."""
    jinja = template_loader().get_template(f"{target.template}.sbatch.j2")
    context = jinja.new_context({"t": target, "shutdown_timeout": TORCHRUN_SHUTDOWN_TIMEOUT_S})
    return "".join(jinja.blocks["environment"](context))


def render_bionemo(target: JobTarget, steps: BioNeMoSteps, nodes: int = 1, time: str | None = None,
                   job_name: str = "bionemo-esm2", threads_per_core: int = 1) -> str:
    """BioNeMo inference as an sbatch script (jobs/templates/bionemo.sbatch.j2): the partition's GPUs, one task
    per GPU in the target's image through pyxis; `time` defaults to the partition's maxTime."""
    if target.template != "nvidia" or not target.gpus_per_node:
        raise RenderError(
            f"{target.description}: BioNeMo's image runs on NVIDIA GPUs, one task per GPU. Fix: pick a partition "
            "of GPU instances (p4d, p5, g5) with --partition")
    if not target.image:
        raise RenderError(f"partition {target.partition}: BioNeMo runs in its image; pass --image IMAGE")
    # Lightning skips its Slurm environment for jobs named so (lightning/fabric/plugins/environments/slurm.py
    # _is_slurm_interactive_mode) and would start a second set of processes per task.
    if job_name in ("bash", "interactive"):
        raise RenderError(f"--job-name {job_name}: Lightning ignores Slurm in a job of that name and would start "
                          "processes of its own in every task. Fix: choose another --job-name")
    time = time or target.max_time or "UNLIMITED"
    # The training scripts' checks of --nodes and --time; a lead of 0, as this script asks for no signal.
    _check_request(target, [steps.infer], nodes, time, SignalLead(0))
    # Whole cores per task: with CR_Core_Memory (components/slinky/slurm_conf.py) Slurm rounds each task up to
    # whole cores, so an odd share of the node's CPUs would ask for more than it has and pend forever.
    cpus = target.cpus_per_node // target.gpus_per_node // threads_per_core * threads_per_core
    # One node: NCCL stays on the node (NVLink), no network plugin needed; EFA settings only for several nodes,
    # where NCCL then runs over aws-ofi-nccl or fails at start (NCCL_NET, jobs/templates/nvidia.sbatch.j2).
    environment = environment_block(dataclasses.replace(target, efa=target.efa and nodes > 1))
    image = container_image(target.image, target.shared_root)
    return template_loader().get_template("bionemo.sbatch.j2").render(
        t=target,
        s=steps,
        nodes=nodes,
        time=time,
        job_name=job_name,
        cpus_per_task=max(cpus, threads_per_core),
        image=image,
        # render_job's pyxis flags, with the models' file system mounted too
        container_flags=" \\\n  ".join([
            '--container-image="${SLURM_EKS_IMAGE}"', f"--container-name={shlex.quote(image.name)}",
            f"--container-mounts={','.join(f'{m}:{m}' for m in (target.shared_root, *steps.mounts))}",
            '--container-workdir="${PWD}"',
        ]),
        environment=environment,
    )


def render_image_pull(target: JobTarget) -> str:
    """The import a job's first run does, alone: a script for bash on the login pod, or for sbatch."""
    if not target.image:
        raise RenderError(f"partition {target.partition} has no image to pull; pass --image IMAGE")
    image = container_image(target.image, target.shared_root)
    if image.uri is None:
        raise RenderError(f"--image {target.image} is already a squashfs file; there is nothing to pull")
    return template_loader().get_template("image_pull.sbatch.j2").render(t=target, image=image)
