"""torchtitan under torchrun, on the job scripts' checkpoint contract: mixture-of-experts with expert parallelism
(Qwen3 MoE, DeepSeek-V3) and Llama 3 pre-training through the engine the field uses (pytorch/torchtitan 0.3.0).

`torchrun ... jobs/recipes/titan.py --module qwen3 --config qwen3_30b_a3b [torchtitan's flags] [ours]`

torchtitan's config system (0.3.0, `torchtitan/config/manager.py`): `--module` names a model family, `--config` a
function of its `config_registry` returning the whole `Trainer.Config`, and any field is overridden in tyro's
dotted form (`--parallelism.expert_parallel_degree 8`, `--training.steps 1000`). Ours: `--stop-file` (default
`$SLURM_EKS_STOP_FILE`), `--stop-check-every N` (default 1: an MoE step is long, the check an all-reduce of a few
CPU integers on a gloo group) and `--dry-run`.

The contract is jobs/train.py's (read its docstring), with torchtitan's checkpoints:

* `dump_folder` is `$SLURM_EKS_CHECKPOINT_DIR` (the job's own directory, which the rendered scripts set) and
  checkpointing is on: torchtitan's DCP checkpoints go to `<dir>/checkpoint/step-<N>/` every
  `--checkpoint.interval` steps, and on start torchtitan loads the newest (its own `CheckpointManager.load`:
  model, optimizer, scheduler, data loader, step). Another `--dump_folder` or an absolute `--checkpoint.folder`
  is refused: the job script looks for the markers in the job's directory.
* A stop request (SIGUSR2 or SIGTERM to a worker, or the stop file, as jobs/training/preemption.py's StopRequest
  sees them) is agreed by every rank before a step whose number `--stop-check-every` divides; on one, the loop
  ends, a full checkpoint of the last step is saved (unless the interval just saved it), rank 0 writes
  `<dir>/PREEMPTED` (JSON: step, reasons, checkpoint) and every worker exits 0.
* A finished run ends with torchtitan's last-step save and `<dir>/DONE` (JSON: step). Rank 0 prints JSON lines:
  `start` (the resolved layout and the model's parameters), then `done` or `preempted`.

`--dry-run` resolves the config as torchtitan does, builds the model on the meta device and prints `start`, with
no process group and no GPU: what the CPU can show of a run (tests/recipes/test_titan.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (torchrun jobs/recipes/titan.py): make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.distributed as dist

from jobs.checkpoint_layout import TITAN_FOLDER
from jobs.training.cadence import RECIPE_STOP_CHECK_EVERY
from jobs.training.config import CHECKPOINT_DIR_ENV, STOP_FILE_ENV
from jobs.training.distributed import DistEnv
from jobs.training.metrics import JsonLog
from jobs.training.preemption import DONE_MARKER, PREEMPTED_MARKER, StopRequest, clear_stale, write_marker

CHECKPOINT_FOLDER = TITAN_FOLDER  # torchtitan's default `checkpoint.folder`, under dump_folder
# The flags of torchtitan's parallelism config (torchtitan/config/configs.py ParallelismConfig) the start line reports.
DEGREES = {
    "dp_replicate": "data_parallel_replicate_degree",
    "dp_shard": "data_parallel_shard_degree",
    "tp": "tensor_parallel_degree",
    "pp": "pipeline_parallel_degree",
    "cp": "context_parallel_degree",
    "ep": "expert_parallel_degree",
}


class RecipeError(ValueError):
    """A request the recipe refuses; the message says what to change."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="titan.py", description="torchtitan on the job scripts' checkpoint contract; other flags go to "
        "torchtitan (--module M --config C, then dotted overrides: --training.steps 100)")
    parser.add_argument("--stop-file", type=Path, default=os.environ.get(STOP_FILE_ENV),
                        help=f"default ${STOP_FILE_ENV}")
    parser.add_argument("--stop-check-every", type=int, default=RECIPE_STOP_CHECK_EVERY, metavar="N",
                        help="agree on stop requests before every N-th step (default 1)")
    parser.add_argument("--dry-run", action="store_true",
                        help="resolve the config and build the model on the meta device, then exit")
    return parser


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg.startswith(f"{flag}="):
            return arg.split("=", 1)[1]
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
    return None


def titan_args(args: Sequence[str], job_dir: Path) -> list[str]:
    """torchtitan's command line with the job's directory as dump_folder and checkpointing on."""
    for flag in ("--dump_folder", "--dump-folder"):
        given = _flag_value(args, flag)
        if given is not None and Path(given).resolve() != job_dir.resolve():
            raise RecipeError(f"{flag} {given}: the job script reads the run's markers from {job_dir} "
                              f"(${CHECKPOINT_DIR_ENV}); leave {flag} out")
    folder = _flag_value(args, "--checkpoint.folder")
    if folder is not None and os.path.isabs(folder):
        raise RecipeError(f"--checkpoint.folder {folder}: checkpoints stay in the job's directory {job_dir}; give "
                          "a relative folder or leave it out")
    # First: a tyro subcommand (activation-checkpoint:full) ends the flags of the config around it.
    return ["--dump_folder", str(job_dir), "--checkpoint.enable", *args]


def parameter_counts(model: torch.nn.Module) -> tuple[int, int]:
    """(all parameters, those a token uses): routed experts count top_k / num_experts of theirs."""
    total = sum(p.numel() for p in model.parameters())
    active = total
    for module in model.modules():
        router = getattr(module, "router", None)
        experts = getattr(module, "routed_experts", None)
        if router is not None and experts is not None:
            routed = sum(p.numel() for p in experts.parameters())
            active -= routed - routed * router.top_k // router.num_experts
    return total, active


def describe(config: Any) -> dict[str, object]:
    """The `start` line: what torchtitan resolved, and the model's parameters (built on the meta device)."""
    spec = config.model_spec
    with torch.device("meta"):
        model = spec.model.build()
    total, active = parameter_counts(model)
    return {
        "model": spec.name, "flavor": spec.flavor, "params": total, "active_params": active,
        "parallelism": {name: getattr(config.parallelism, field) for name, field in DEGREES.items()},
        "steps": config.training.steps, "seq_len": config.training.seq_len,
        "local_batch_size": config.training.local_batch_size,
        "activation_checkpoint": type(config.activation_checkpoint).__qualname__.split(".")[0],
        "checkpoint_enabled": config.checkpoint.enable,
        "checkpoint_folder": os.path.join(config.dump_folder, config.checkpoint.folder),
        "checkpoint_interval": config.checkpoint.interval,
    }


class StopHook:
    """Takes the place of the trainer's `should_continue_training` (torchtitan/trainer.py calls it before each
    step): before a step whose number `every` divides, every rank agrees on stop requests (`agree`, a collective,
    so all ranks call it at the same steps); after a stop, the loop ends."""

    def __init__(self, trainer: Any, agree: Callable[[], list[str]], every: int) -> None:
        if every < 1:
            raise RecipeError(f"--stop-check-every {every}: give a number of steps, at least 1")
        self.trainer, self.agree, self.every = trainer, agree, every
        self.reasons: list[str] = []
        self._keep_going = trainer.should_continue_training
        trainer.should_continue_training = self

    def __call__(self) -> bool:
        if not self._keep_going():
            return False
        if self.trainer.step % self.every == 0:
            self.reasons = self.agree()
        return not self.reasons


def save_now(checkpointer: Any, step: int) -> Path:
    """A full checkpoint of `step` (model, optimizer, scheduler, data loader, step), written before returning;
    none when the interval just wrote it. torchtitan saves when the interval divides the step: an interval of 1
    makes this step one."""
    path = Path(checkpointer.folder) / f"step-{step}"
    if not (path / ".metadata").exists():
        checkpointer.interval = 1
        checkpointer.save(step)
        checkpointer.maybe_wait_for_saving()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ours, rest = build_parser().parse_known_args(argv)
    job_dir = os.environ.get(CHECKPOINT_DIR_ENV)
    if not job_dir:
        sys.exit(f"titan.py: ${CHECKPOINT_DIR_ENV} is not set; the rendered job scripts set it "
                 "(slurm-eks job render), or export it to a directory of yours")
    try:
        args = titan_args(rest, Path(job_dir))
    except RecipeError as error:
        sys.exit(f"titan.py: {error}")

    from torchtitan.config import ConfigManager  # the image's torchtitan, imported once the flags are ours
    from torchtitan.tools.logging import init_logger

    init_logger()
    config = ConfigManager().parse_args(args)
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    log = JsonLog(rank == 0)
    log(event="start", **describe(config))
    if ours.dry_run:
        return 0

    if rank == 0:
        clear_stale(Path(job_dir), ours.stop_file)
    stop = StopRequest(ours.stop_file, poll_file=local_rank == 0)
    trainer = config.build()  # initialises the process group (NCCL on GPUs)
    env = DistEnv(rank, local_rank, dist.get_world_size(), torch.device("cpu"), dist.new_group(backend="gloo"))
    dist.barrier(group=env.cpu_group)  # the stale stop file is gone (rank 0 cleared it) before any rank looks
    hook = StopHook(trainer, lambda: stop.agreed(env), ours.stop_check_every)
    try:
        trainer.train()
        if hook.reasons:
            saved = save_now(trainer.checkpointer, trainer.step)
            if rank == 0:
                write_marker(Path(job_dir), PREEMPTED_MARKER,
                             {"step": trainer.step, "reasons": hook.reasons, "checkpoint": str(saved)})
            log(event="preempted", step=trainer.step, reasons=hook.reasons, checkpoint=str(saved))
        else:
            if rank == 0:
                write_marker(Path(job_dir), DONE_MARKER, {"step": trainer.step})
            log(event="done", step=trainer.step)
    finally:
        trainer.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
