"""`slurm-eks local ...` (the local one-node Slurm) and `slurm-eks job ...` (submit/status/cancel/logs).

Two typer apps, registered by scripts/cli/main.py. To add a job command, decorate a function with
`@job_app.command()` and wrap its body in `with clear_errors():` so failures print one line, not a traceback.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from scripts.advise.entry_fit import entry_fit
from scripts.advise.hardware import partition_hardware
from slurm import client, local
from slurm.backend import JobBackend
from slurm.cli_backend import CliBackend
from slurm.jobinfo import JobInfo
from slurm.local import layout
from slurm.local.config import FAKE_GPUS
from slurm.local.config import PARTITION as LOCAL_PARTITION
from slurm.local.topology import detect_node


class TableFormat(StrEnum):
    table = "table"
    json = "json"


def _console() -> Console:
    """Made per call, so the COLUMNS and NO_COLOR of this run apply (rich reads them when a Console is made)."""
    return Console()


errors = Console(stderr=True, soft_wrap=True)  # an error stays one line, however long

local_app = typer.Typer(help="A real one-node Slurm on this machine (needs root and apt).", no_args_is_help=True)
job_app = typer.Typer(
    help="Submit and follow Slurm jobs (pyslurm where it imports, else the CLI).", no_args_is_help=True
)

image_app = typer.Typer(
    help="Partition images as squashfs files on /shared, imported once for every job.", no_args_is_help=True
)
job_app.add_typer(image_app, name="image")

BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend", help="auto (pyslurm if importable, else CLI), cli or pyslurm. Env: SLURM_EKS_JOB_BACKEND."
    ),
]


@contextmanager
def clear_errors() -> Iterator[None]:
    """Known failures become one red line and exit status 1."""
    try:
        yield
    except (client.JobClientError, local.LocalSlurmError) as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", markup=True, highlight=False)
        raise typer.Exit(1) from None


@contextmanager
def render_errors() -> Iterator[None]:
    """A stack or a request that cannot give a correct script: its message, and exit status 2."""
    from jobs.render import RenderError  # jinja2 and the config models: imported by the commands that render

    try:
        yield
    except ConfigError as exc:
        errors.print(exc.render(), highlight=False, markup=False)
        raise typer.Exit(2) from None
    except RenderError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None


def _when(moment: datetime | None) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _exit(job: JobInfo) -> str:
    if job.exit_signal:
        return f"{job.exit_code if job.exit_code is not None else '?'} (signal {job.exit_signal})"
    return "-" if job.exit_code is None else str(job.exit_code)


def _elapsed(job: JobInfo) -> str:
    """Run time as Slurm prints it, [D-]H:MM:SS; a running job's counts up to now."""
    if job.start_time is None:
        return "-"
    end = job.end_time or datetime.now(job.start_time.tzinfo)
    seconds = max(0, int((end - job.start_time).total_seconds()))
    days, seconds = divmod(seconds, 86400)
    hours, seconds = divmod(seconds, 3600)
    text = f"{hours}:{seconds // 60:02d}:{seconds % 60:02d}"
    return f"{days}-{text}" if days else text


def _reason_or_exit(job: JobInfo) -> str:
    """Why a job waits while it waits, how it ended once it has."""
    if job.reason and job.reason != "None":
        return job.reason
    return _exit(job)


def jobs_table(jobs: list[JobInfo], wide: bool = False) -> Table:
    """The columns that fit 80 characters (ID, NAME, STATE, REASON/EXIT, ELAPSED, NODES, PARTITION); `wide`: all."""
    if wide:
        table = Table(
            "ID", "NAME", "USER", "STATE", "REASON", "PARTITION", "NODES", "EXIT", "RESTARTS", "ELAPSED", "SUBMIT",
            "START", "END",
        )
        for job in jobs:
            table.add_row(
                str(job.job_id),
                job.name,
                job.user or "-",
                job.state,
                job.reason or "-",
                job.partition or "-",
                job.nodes or "-",
                _exit(job),
                str(job.restart_count),
                _elapsed(job),
                _when(job.submit_time),
                _when(job.start_time),
                _when(job.end_time),
            )
        return table
    # No borders, two spaces between columns; the words that matter never shrink, and NODES and
    # REASON/EXIT fold onto a second line rather than lose characters.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("ID", no_wrap=True)
    table.add_column("NAME", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    table.add_column("REASON/EXIT", overflow="fold")
    table.add_column("ELAPSED", no_wrap=True)
    table.add_column("NODES", overflow="fold")
    table.add_column("PARTITION", no_wrap=True)
    for job in jobs:
        table.add_row(
            str(job.job_id),
            job.name,
            job.state,
            _reason_or_exit(job),
            _elapsed(job),
            job.nodes or "-",
            job.partition or "-",
        )
    return table


def cluster_table(status: local.ClusterStatus) -> Table:
    table = Table("DAEMON", "PID", "ALIVE", "LOG", title=f"local Slurm in {status.state_dir}")
    for daemon in status.daemons:
        alive = "[green]yes[/green]" if daemon.alive else "[red]no[/red]"
        table.add_row(daemon.name, str(daemon.pid or "-"), alive, str(daemon.log))
    node = status.node
    node_text = f"{node.name}: {node.state}" + (f" ({node.reason})" if node.reason else "") if node else "unknown"
    table.caption = f"node {node_text}"
    return table


def _step(message: str) -> None:
    """Progress of a slow engine step (apt-get install), as it happens."""
    _console().print(message, highlight=False)


@local_app.command("up")
def local_up(
    stack: Annotated[str | None, typer.Option("--stack", "-s", help="start the twin of this stack's cluster")] = None,
    nodes: Annotated[int | None, typer.Option(
        "--nodes", min=1, help="twin: this many slurmd pods per partition from the start, and no autoscaling "
        "(default: none, and the cluster's controllers scale each partition for its jobs while this runs)")] = None,
) -> None:
    """Install (if missing) and start munge, MariaDB, slurmdbd, slurmctld and slurmd; wait for an idle node.
    With --stack: the stack's twin instead (its Slinky pods from the offline plan, policies enforced), from zero
    nodes: KEDA, the HPA, the NodeSet controller and Karpenter act in the foreground until Ctrl-C."""
    if stack:
        from scripts.cli import twin  # plans with Pulumi's SDK: not on the login pod, where the job CLI runs

        with twin_errors():
            twin.up(stack, nodes, _console())
        return
    with clear_errors():
        started_at = time.monotonic()
        status = local.up(on_step=_step)
        _console().print(cluster_table(status))  # what was installed was said as it happened (_step)
        what = f"started {', '.join(status.started)}" if status.started else "already up, nothing to start"
        _console().print(f"{what} ({time.monotonic() - started_at:.1f} s). Try: sbatch --wrap hostname")


@local_app.command("down")
def local_down(
    stack: Annotated[str | None, typer.Option("--stack", "-s", help="stop the twin of this stack")] = None,
) -> None:
    """Stop every daemon by the pid in its pidfile (TERM, KILL after 15 s). State stays for the next `up`."""
    if stack:
        from scripts.cli import twin

        with twin_errors():
            stopped = twin.down(stack)
            _console().print(f"stopped {', '.join(stopped)}" if stopped else "no twin of that stack was running")
        return
    with clear_errors():
        stopped = local.down()
        _console().print(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


@local_app.command("login")
def local_login(
    stack: Annotated[str, typer.Option("--stack", "-s", help="the twin of this stack")],
    user: Annotated[str | None, typer.Option("--user", "-u", help="a person the stack declares")] = None,
) -> None:
    """A login shell on the twin's login pod, as a person of the stack (as root without --user)."""
    from scripts.cli import twin

    with twin_errors():
        argv = twin.login_argv(stack, user)
    os.execvp(argv[0], argv)


@contextmanager
def twin_errors() -> Iterator[None]:
    """A twin that cannot start or be reached: its message, exit status 1 (the twin is torn down on failure)."""
    from scripts.twin.errors import TwinError

    try:
        yield
    except TwinError as exc:
        errors.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(1) from None


@local_app.command("status")
def local_status(
    format: Annotated[TableFormat, typer.Option(help="table for people, json for tools (docs/cli-json.md)")] = (
        TableFormat.table),
) -> None:
    """Each daemon (pid, alive) and the node state; exit status 3 when the cluster is not fully up."""
    with clear_errors():
        status = local.status()
        if format is TableFormat.json:
            node = status.node
            typer.echo(json.dumps({
                "format": 1, "up": status.up, "state_dir": str(status.state_dir),
                "daemons": [{"name": d.name, "pid": d.pid, "alive": d.alive, "log": str(d.log)}
                            for d in status.daemons],
                "node": {"name": node.name, "state": node.state, "reason": node.reason, "usable": node.usable}
                if node else None}, indent=2))
        else:
            _console().print(cluster_table(status))
        if not status.up:
            raise typer.Exit(3)


def _at_a_terminal() -> bool:
    return sys.stdin.isatty()


def _consent_to_local_setup(yes: bool) -> None:
    """`--local` on a machine where the local cluster is not up installs packages and starts daemons as root: say
    which, and go on only with --yes or a yes at the terminal (exit 1 otherwise, nothing done)."""
    to_install, to_start = local.pending()
    if not to_start:
        return
    installs = f"install {', '.join(to_install)} with apt-get, then " if to_install else ""
    _console().print(f"--local: the local Slurm cluster is not up; this will {installs}start {', '.join(to_start)} "
                     f"as root on this machine (state in {layout.default_state_dir()}; `slurm-eks local down` "
                     "stops them)", highlight=False, markup=False)
    if yes:
        return
    if not _at_a_terminal():
        errors.print("error: not a terminal to ask at: give --yes to allow it, or start it first with "
                     "`slurm-eks local up`", markup=False, highlight=False)
        raise typer.Exit(1)
    if not typer.confirm("go on?", default=False):
        errors.print("nothing was installed or started", markup=False, highlight=False)
        raise typer.Exit(1)


def _backend(name: str | None, use_local: bool) -> JobBackend:
    # The local cluster is Debian's Slurm 22.05; pyslurm 25.11 cannot talk to it.
    return CliBackend() if use_local else client.select_backend(name)


@job_app.command("submit", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def job_submit(
    ctx: typer.Context,
    script: Annotated[Path, typer.Argument(help="Batch script; its #SBATCH lines apply unless overridden.")],
    use_local: Annotated[
        bool, typer.Option("--local", help="Target the local cluster (brought up if needed).")
    ] = False,
    partition: Annotated[str | None, typer.Option("--partition", "-p")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", min=1)] = None,
    time_limit: Annotated[str | None, typer.Option("--time", "-t", help="e.g. 30, 2:00:00, 1-00:00:00")] = None,
    gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", min=0)] = None,
    job_name: Annotated[str | None, typer.Option("--job-name", "-J")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o")] = None,
    backend: BackendOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="with --local: install and start without asking")] = False,
) -> None:
    """Submit SCRIPT; other sbatch options (e.g. --requeue, --export=ALL,X=1) are passed through."""
    with clear_errors():
        if use_local:
            _consent_to_local_setup(yes)
            local.up(on_step=_step)
            partition = partition or LOCAL_PARTITION
        options = client.SubmitOptions(
            partition=partition,
            nodes=nodes,
            time=time_limit,
            gpus_per_node=gpus_per_node,
            job_name=job_name,
            output=output,
            extra_args=tuple(ctx.args),
        )
        job_id = client.submit(script, options, _backend(backend, use_local))
        _console().print(f"submitted job {job_id}")


@job_app.command("status")
def job_status(
    job_id: Annotated[int | None, typer.Argument(help="One job (also finished ones, from accounting).")] = None,
    wide: Annotated[
        bool, typer.Option("--wide", "-w", help="Every column (user, restarts, submit/start/end times).")
    ] = False,
    backend: BackendOption = None,
    format: Annotated[TableFormat, typer.Option(help="table for people, json for tools (docs/cli-json.md)")] = (
        TableFormat.table),
) -> None:
    """A table of the jobs slurmctld knows, or of JOBID; `--wide` for every column."""
    with clear_errors():
        chosen = client.select_backend(backend)
        jobs = [client.status(job_id, chosen)] if job_id is not None else client.list_jobs(chosen)
        if format is TableFormat.json:
            typer.echo(json.dumps({"format": 1, "jobs": [job_json(job) for job in jobs]}, indent=2))
            return
        _console().print(jobs_table(jobs, wide=wide))


def job_json(job: JobInfo) -> dict[str, object]:
    """A job as `job status --format json` gives it: JobInfo's fields, times in ISO 8601 (UTC), plus `finished`."""
    fields = dataclasses.asdict(job)
    for key in ("submit_time", "start_time", "end_time"):
        fields[key] = fields[key].isoformat() if fields[key] is not None else None
    return {**fields, "finished": job.finished}


@job_app.command("cancel")
def job_cancel(job_id: int, backend: BackendOption = None) -> None:
    """Cancel JOBID."""
    with clear_errors():
        client.cancel(job_id, client.select_backend(backend))
        _console().print(f"cancelled job {job_id}")


@job_app.command("logs")
def job_logs(
    job_id: int,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing until the job ends.")] = False,
    backend: BackendOption = None,
) -> None:
    """Print the job's stdout file."""
    with clear_errors():
        chosen = client.select_backend(backend)
        if not follow:
            _console().out(client.logs(job_id, chosen), end="", highlight=False)
            return
        for chunk in client.follow_logs(job_id, backend=chosen):
            _console().out(chunk, end="", highlight=False)


# Unknown options are errors here (a typo such as --node would otherwise become the entry point);
# only what follows `--` is the job's.
@job_app.command("render", context_settings={"allow_extra_args": True})
def job_render(
    ctx: typer.Context,
    stack: Annotated[str | None, typer.Option("--stack", "-s", help="stack whose partition to target")] = None,
    partition: Annotated[str | None, typer.Option("--partition", "-p")] = None,
    use_local: Annotated[bool, typer.Option("--local", help="target the local cluster (partition cpu, gloo)")] = False,
    nodes: Annotated[int, typer.Option("--nodes", "-N", min=1)] = 1,
    time_limit: Annotated[str | None, typer.Option("--time", "-t", help="default: the partition's maxTime")] = None,
    job_name: Annotated[str | None, typer.Option("--job-name", "-J", help="default: the entry point's name")] = None,
    image: Annotated[str | None, typer.Option(help="container image for the steps (pyxis)")] = None,
    no_container: Annotated[bool, typer.Option("--no-container", help="run the steps on the node's image")] = False,
    neuron_runtime: Annotated[
        str | None, typer.Option(help="Trainium: native (TorchNeuron, trn2/trn3) or xla (the legacy torch-xla path, "
                                 "trn1 and images before Neuron 2.30); default: native where the chips run it")
    ] = None,
    signal_lead: Annotated[
        int | None, typer.Option(min=0, help="seconds before the time limit to checkpoint (default 300)")
    ] = None,
    checkpoint_gb: Annotated[
        float | None,
        typer.Option(help="size of one checkpoint in GB: sizes the signal lead to /shared's write throughput"),
    ] = None,
    step_seconds: Annotated[
        float | None,
        typer.Option(help="seconds one training step takes (`slurm-eks advise` prints it): the lead then covers "
                     "the wait for the ranks' next stop check, and a --signal-lead that cannot is refused"),
    ] = None,
    max_requeues: Annotated[int, typer.Option(help="requeues after a preemption before giving up")] = 3,
    checkpoint_s3: Annotated[str | None, typer.Option(
        help="copy checkpoints to this s3://bucket/prefix (default: the stack's storage.checkpointStore)")] = None,
    checkpoint_sync_interval: Annotated[int | None, typer.Option(
        help="seconds between copies to S3 (default: the partition's or the store's)")] = None,
    checkpoint_keep: Annotated[int | None, typer.Option(
        help="checkpoints of this job kept in S3 (default: the partition's or the store's)")] = None,
    no_checkpoint_sync: Annotated[bool, typer.Option(
        "--no-checkpoint-sync", help="keep this job's checkpoints on /shared only")] = False,
    evaluate: Annotated[bool, typer.Option(
        "--evaluate", help="when training finishes, a one-node job evaluates the newest checkpoint (held-out "
        "perplexity; registered in the cluster's MLflow when addons.mlflow is on)")] = False,
    eval_data: Annotated[str | None, typer.Option(help="--evaluate: held-out token file (default: synthetic)")] = None,
    eval_time: Annotated[str, typer.Option(help="--evaluate: the evaluation job's time limit")] = "1:00:00",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write here instead of stdout")] = None,
    stacks_dir: Annotated[Path, typer.Option(help="directory of Pulumi.<stack>.yaml")] = STACKS_DIR,
    no_fit_check: Annotated[
        bool, typer.Option("--no-fit-check", help="render a jobs/train.py layout that advise's memory model says "
                           "does not fit the partition's GPUs or host memory")] = False,
) -> None:
    """Write an sbatch script for a partition; the entry point and its arguments go after `--`."""
    from jobs import render

    with render_errors():
        if use_local:
            state = layout.default_state_dir()
            (state / "logs").mkdir(parents=True, exist_ok=True)  # Slurm does not create --output dirs
            (state / "checkpoints").mkdir(exist_ok=True)  # the scripts make their own, private, directories in it
            target = render.local_target(state, cpus=_local_cpus(), gpus=FAKE_GPUS)
            limit = time_limit or "UNLIMITED"
        else:
            if not stack or not partition:
                raise render.RenderError("give --stack and --partition (or --local)")
            config, _ = load_stack(stack, stacks_dir)
            target = render.target_for_partition(config, stack, partition, image, container=not no_container,
                                                 neuron_runtime=neuron_runtime)
            limit = time_limit or config.partitions[partition].max_time
            hardware = partition_hardware(config, stack, partition, target.neuron_runtime)
            fit = entry_fit(hardware, list(ctx.args), nodes)
            if fit is not None and not fit.fits and not no_fit_check:
                model = fit.model
                raise render.RenderError(
                    f"{fit.problem(hardware.device_word)}: it would stop at its first step. `slurm-eks advise --stack "
                    f"{stack} --partition {partition} --model {model} --seq-len {fit.seq_len}` prints a layout that "
                    "fits; --no-fit-check renders this one anyway")  # fmt: skip
        target = render.with_checkpoint_sync(target, checkpoint_s3, checkpoint_sync_interval, checkpoint_keep,
                                             no_checkpoint_sync)
        lead = render.signal_lead(target, list(ctx.args), signal_lead, checkpoint_gb, step_seconds)
        evaluation = render.evaluation_for(list(ctx.args), render.job_name_for(list(ctx.args), job_name), eval_time,
                                           eval_data) if evaluate else None  # fmt: skip
        script = render.render_job(target, list(ctx.args), nodes=nodes, time=limit, job_name=job_name,
                                   lead=lead, max_requeues=max_requeues, evaluate=evaluation)
    if lead.formula:  # on stderr, so `job render ... > job.sbatch` still shows it
        errors.print(f"signal lead: {lead.formula}", highlight=False, markup=False)
    _emit(script, output)


@job_app.command("deepspeed-config")
def job_deepspeed_config(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack whose partition to target")],
    partition: Annotated[str, typer.Option("--partition", "-p")],
    offload: Annotated[
        bool, typer.Option("--offload", help="optimizer state and parameters in pinned host memory")
    ] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write here instead of stdout")] = None,
    stacks_dir: Annotated[Path, typer.Option(help="directory of Pulumi.<stack>.yaml")] = STACKS_DIR,
) -> None:
    """Write the DeepSpeed ZeRO-3 config for a partition's GPUs (jobs/recipes/hf_finetune.py --deepspeed FILE)."""
    from jobs.recipes import deepspeed_config  # the config models: imported when the command runs

    with render_errors():
        config, _ = load_stack(stack, stacks_dir)
        made = deepspeed_config.for_partition(config, stack, partition, offload)
    _emit(json.dumps(made.config, indent=2) + "\n", output, f": {made.summary}")


# Only what follows `--` is infer_esm2's, as with `job render`.
@job_app.command("bionemo", context_settings={"allow_extra_args": True})
def job_bionemo(
    ctx: typer.Context,
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack whose partition to target")],
    partition: Annotated[str, typer.Option("--partition", "-p", help="a partition of NVIDIA GPUs")],
    nodes: Annotated[int, typer.Option("--nodes", "-N", min=1)] = 1,
    time_limit: Annotated[str | None, typer.Option("--time", "-t", help="default: the partition's maxTime")] = None,
    job_name: Annotated[str | None, typer.Option("--job-name", "-J", help="default: bionemo-esm2")] = None,
    image: Annotated[str | None, typer.Option(help="default: the pinned BioNeMo Framework image")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write here instead of stdout")] = None,
    stacks_dir: Annotated[Path, typer.Option(help="directory of Pulumi.<stack>.yaml")] = STACKS_DIR,
) -> None:
    """Write an sbatch script of BioNeMo ESM-2 inference (infer_esm2 through pyxis, one task per GPU); its
    arguments go after `--`, --data-path required (docs/bionemo.md)."""
    from scripts.k8s.bionemo import sbatch_script  # one definition of the BioNeMo job, shared with `k8s render`

    with render_errors():
        config, _ = load_stack(stack, stacks_dir)
        script = sbatch_script(config, stack, partition, list(ctx.args), nodes, time_limit, job_name, image)
    _emit(script, output)


@image_app.command("pull")
def image_pull(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack whose partition to target")],
    partition: Annotated[str, typer.Option("--partition", "-p")],
    image: Annotated[str | None, typer.Option(help="default: the partition's training image")] = None,
    submit: Annotated[
        bool, typer.Option("--submit", help="import on a node of the partition (a one-node sbatch job)")
    ] = False,
    backend: BackendOption = None,
    stacks_dir: Annotated[Path, typer.Option(help="directory of Pulumi.<stack>.yaml")] = STACKS_DIR,
) -> None:
    """Import the partition's image into your own squashfs file on /shared now, as your first job would."""
    from jobs import render

    with render_errors():
        config, _ = load_stack(stack, stacks_dir)
        target = render.target_for_partition(config, stack, partition, image)
        script = render.render_image_pull(target)
    if submit:
        with clear_errors():
            job_id = _submit_text(script, client.select_backend(backend))
        _console().print(f"submitted job {job_id}: it imports the image of partition {partition}; log: "
                         f"{target.logs_dir.replace('%u', getpass.getuser())}/image-pull-{job_id}.out",
                         highlight=False)
        return
    if shutil.which("enroot") is None:
        errors.print(
            "[red]error:[/red] enroot is not on PATH here: run `slurm-eks job image pull` on the login pod, "
            f"where enroot is installed, or add --submit to import on a node of partition {partition}",
            highlight=False,
        )
        raise typer.Exit(1)
    result = subprocess.run(["bash", "-c", script], check=False)
    if result.returncode:
        errors.print(f"[red]error:[/red] the import failed (exit {result.returncode}); see above", highlight=False)
        raise typer.Exit(1)


def _emit(text: str, output: Path | None, note: str = "") -> None:
    """`text` on stdout, or into `output` with a line that says so (and `note`)."""
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        errors.print(f"[red]error:[/red] cannot write {output}: {exc.strerror}", highlight=False)
        raise typer.Exit(2) from None
    _console().print(f"wrote {output}{note}", highlight=False, soft_wrap=True)


def _submit_text(script: str, backend: JobBackend) -> int:
    """sbatch reads the script when it submits, so a temporary file serves."""
    with tempfile.NamedTemporaryFile("w", prefix="slurm-eks-", suffix=".sbatch") as file:
        file.write(script)
        file.flush()
        return client.submit(Path(file.name), client.SubmitOptions(), backend)


def _local_cpus() -> int:
    try:
        return detect_node().cpus
    except (OSError, local.LocalSlurmError):  # slurmd not installed yet: the node will have every CPU
        return os.cpu_count() or 1
