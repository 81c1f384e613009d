"""The training loop: build everything, resume from the newest complete checkpoint, train, stop cleanly."""

from __future__ import annotations

import dataclasses
import gc
import math
import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from jobs.training.cadence import StopCadence
from jobs.training.checkpoint import (
    Checkpointer,
    DcpCheckpointer,
    Progress,
    TrainingState,
    XlaCheckpointer,
    latest_complete,
)
from jobs.training.config import TrainConfig
from jobs.training.data import BatchLoader, SyntheticTokens, TokenFile, TokenSource
from jobs.training.distributed import DistEnv, init_distributed
from jobs.training.mesh import ParallelDims, build_mesh, dp_rank, first_of_stage, parallel_dims
from jobs.training.metrics import JsonLog, Throughput, params_sha256, peak_bf16_flops
from jobs.training.model import Transformer, count_params
from jobs.training.optim import build_optimizer, build_scheduler
from jobs.training.parallelize import (
    Parallelized,
    autocast_context,
    clip_grad_norm_,
    grad_sync_context,
    parallelize,
    settle_ddp_buckets,
)
from jobs.training.preemption import DONE_MARKER, PREEMPTED_MARKER, StopRequest, clear_stale, write_marker
from jobs.training.released import ReleasedWeights, read_release

# Steps a graph-extraction run (neuron_parallel_compile) traces: the first (it creates AdamW's state) and a
# steady one; every later step runs the same graphs.
EXTRACT_STEPS = 2


@dataclass(frozen=True)
class RunResult:
    step: int
    preempted: bool
    params_sha256: str | None


def _rank_seed(seed: int, rank: int, step: int) -> int:
    return (seed * 1_000_003 + rank) * 1_000_003 + step


def make_train_step(
    par: Parallelized,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    loader: BatchLoader,
    cfg: TrainConfig,
    env: DistEnv,
) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """One optimizer step over `cfg.grad_accum` micro-batches; returns (mean loss, grad norm) tensors, left on
    the device so the caller decides when to synchronise. Under PP the schedule runs the micro-batches, and
    only the last stage has the loss (0 on the others). On XLA the gradients are averaged over replicas
    before clipping (there is no DDP wrapper) and the step ends with a graph cut."""
    model, pipeline = par.model, par.pipeline
    autocast = autocast_context(model, env)
    device = env.device
    xla = _xla() if env.is_xla else None

    def train_step() -> tuple[torch.Tensor, torch.Tensor]:
        if pipeline is not None:
            # The same micro-batches as without PP, stacked: the schedule splits them again.
            batches = [loader.next() for _ in range(cfg.grad_accum)]
            inputs, targets = (torch.cat(parts).to(device, non_blocking=True) for parts in zip(*batches, strict=True))
            loss_sum = pipeline.step(inputs, targets)
        else:
            loss_sum = torch.zeros((), device=device)
            for micro in range(cfg.grad_accum):
                inputs, targets = (t.to(device, non_blocking=True) for t in loader.next())
                with grad_sync_context(model, sync=micro == cfg.grad_accum - 1), autocast(), par.loss_context():
                    loss = model(inputs, targets) / cfg.grad_accum
                    loss.backward()
                loss_sum += loss.detach()
        if xla is not None:
            xla.reduce_gradients(optimizer)
        max_norm = cfg.grad_clip if cfg.grad_clip > 0 else math.inf
        grad_norm = clip_grad_norm_(model.parameters(), max_norm, pipeline.group if pipeline is not None else None)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if xla is not None:
            xla.sync()
        return loss_sum, grad_norm

    return train_step


def _xla() -> ModuleType:
    """jobs.training.xla, imported only on XLA devices (torch_xla is only in the Neuron image)."""
    from jobs.training import xla

    return xla


def _seed(env: DistEnv, seed: int) -> None:
    torch.manual_seed(seed)
    if env.is_xla:  # dropout on an XLA device draws from XLA's own generator
        _xla().manual_seed(seed)


def _token_source(cfg: TrainConfig) -> TokenSource:
    if cfg.data is None:
        return SyntheticTokens(cfg.model.shape.vocab_size, cfg.seed)
    return TokenFile(cfg.data, cfg.data_dtype, cfg.model.shape.vocab_size, cfg.model.seq_len, seed=cfg.seed)


def _mean_over_replicas(value: torch.Tensor, dims: ParallelDims) -> float:
    """The mean of a value each data-parallel replica holds on its last pipeline stage's ranks (0 on the other
    stages), the same on each of their tensor-parallel ranks."""
    total = value.detach().clone()
    dist.all_reduce(total)  # SUM: the one reduction every backend (gloo included) supports
    return total.item() / (dist.get_world_size() // dims.pp)


def layout(cfg: TrainConfig, env: DistEnv) -> tuple[ParallelDims, DeviceMesh | None]:
    """The parallel layout from the flags and the world (ValueError when they do not fit), and its device
    mesh; on XLA plain data parallelism through xm, without a mesh."""
    if env.is_xla:
        return ParallelDims(pp=1, dp_replicate=env.world_size, dp_shard=1, tp=1, fsdp=False), None
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", env.world_size))  # set by torchrun
    dims = parallel_dims(env.world_size, local_world_size, tp=cfg.tp, pp=cfg.pp, dp_replicate=cfg.dp_replicate,
                         fsdp=cfg.fsdp)  # fmt: skip
    return dims, build_mesh(dims, env.device.type)


def train(cfg: TrainConfig) -> RunResult:
    env = init_distributed(cfg.device)
    if env.is_xla and _xla().extracting_graphs():
        # neuron_parallel_compile's trial run: outputs are zeros, so trace the graphs and keep nothing.
        cfg = dataclasses.replace(cfg, steps=min(cfg.steps, EXTRACT_STEPS), log_every=1, checkpoint_dir=None,
                                  stop_file=None)  # fmt: skip
    result = _train(cfg, env)
    # Only after a clean finish: on an error, peers may still be inside a collective and destroy would
    # hang. The GC pass first frees FSDP2's reference cycles (modules <-> DTensors <-> process group) while
    # the group is alive; 2 of ~14 early FSDP2/gloo runs here aborted at interpreter exit ("terminate
    # called without an active exception"), none of 32 since (cause not pinned down).
    gc.collect()
    dist.destroy_process_group()
    return result


def _train(cfg: TrainConfig, env: DistEnv) -> RunResult:
    log = JsonLog(env.is_main)
    if env.is_main:
        clear_stale(cfg.checkpoint_dir, cfg.stop_file)
    stop = StopRequest(cfg.stop_file, poll_file=env.local_rank == 0)
    dist.barrier(group=env.cpu_group)  # markers cleared before any rank can look for a stop file

    dims, mesh = layout(cfg, env)
    # The model on the meta device (no memory), laid out over the mesh, then each rank allocates and initialises
    # only its shards from the whole model's initial values (jobs/training/materialize.py): host memory per rank
    # follows its shard, not the model, and every layout starts from the same weights.
    # Released weights (--init-from) are read the same way, a tensor at a time, each rank keeping its slice.
    torch.manual_seed(cfg.seed)
    with torch.device("meta"):
        net = Transformer(cfg.model, seed=cfg.seed)
    flops = cfg.model.shape.flops_per_token(cfg.model.seq_len)
    n_params = count_params(net)
    weights = ReleasedWeights(read_release(cfg.init_from)) if cfg.init_from is not None else None
    try:
        par = parallelize(net, env, dims, mesh, activation_checkpointing=cfg.activation_checkpointing,
                          ac_every=cfg.ac_every,
                          compile_blocks=cfg.compile, n_microbatches=cfg.grad_accum, seed=cfg.seed,
                          values=weights)  # fmt: skip
    finally:
        if weights is not None:
            weights.close()
    model = par.model
    # Before the checkpoint is loaded, on every start: the step after a resume reduces like the same step of
    # an uninterrupted run (see settle_ddp_buckets).
    settle_ddp_buckets(model, cfg.batch_size, cfg.model.seq_len, env)
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, env.device)
    scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)
    # One replica's ranks (its tensor-parallel and pipeline peers) read the same batches.
    replica = dp_rank(mesh, dims) if mesh is not None else env.rank
    loader = BatchLoader(_token_source(cfg), cfg.batch_size, cfg.model.seq_len, replica, dims.dp)
    ckpt = _checkpointer(cfg, env, model, optimizer, scheduler)

    step = 0
    _seed(env, _rank_seed(cfg.seed, env.rank, 0))  # dropout differs per rank
    resume = latest_complete(cfg.checkpoint_dir) if cfg.checkpoint_dir is not None else None
    if ckpt is not None and resume is not None:
        progress, has_rng = ckpt.load(resume[1])
        step, loader.position = progress.step, progress.data_position
        if not has_rng:  # world size changed: no saved RNG for this rank, so derive one
            _seed(env, _rank_seed(cfg.seed, env.rank, step))
        log(event="resumed", step=step, checkpoint=str(resume[1]), rng_restored=has_rng)
    log(
        event="start",
        step=step,
        steps=cfg.steps,
        world_size=env.world_size,
        device=str(env.device),
        runtime=env.kind,
        backend=str(dist.get_backend()),
        parallelism="xla-dp" if env.is_xla else dims.describe(),
        model=cfg.model.name,
        params=n_params,
        data=str(cfg.data) if cfg.data else "synthetic",
        init=str(cfg.init_from) if cfg.init_from is not None else "random",
        # This rank's peak resident host memory so far (model built, laid out, checkpoint loaded).
        host_peak_gib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
    )

    train_step = make_train_step(par, optimizer, scheduler, loader, cfg, env)
    meter = Throughput(
        cfg.batch_size * cfg.model.seq_len * cfg.grad_accum * dims.dp,
        flops,
        peak_bf16_flops(env.device),
        env.world_size,
    )
    last_checkpoint: Path | None = None
    reasons: list[str] = []
    cadence = StopCadence(cfg.stop_check_every)  # every N steps, or about every 10 s (jobs/training/cadence.py)
    while step < cfg.steps and not reasons:
        lr = scheduler.get_last_lr()[0]
        if env.is_xla:  # dropout masks a function of (seed, rank, step): see jobs/training/xla.py manual_seed
            _xla().manual_seed(_rank_seed(cfg.seed, env.rank, step))
        loss, grad_norm = train_step()
        step += 1
        meter.step()
        if cadence.due(step):
            reasons, slowest_ms = stop.agree(env, cadence.elapsed_ms())
            cadence.agreed(step, slowest_ms)
        if step % cfg.log_every == 0 or step == cfg.steps:
            log(
                step=step,
                loss=round(_mean_over_replicas(loss, dims), 5),
                lr=lr,
                grad_norm=round(grad_norm.item(), 4),
                **meter.report(),
            )
        if ckpt is not None and (step % cfg.checkpoint_every == 0 or step == cfg.steps or reasons):
            final = step == cfg.steps or bool(reasons)
            last_checkpoint = ckpt.save(Progress(step, loader.position), wait=final)
            log(event="checkpoint", step=step, path=str(last_checkpoint), waited=final)

    if ckpt is not None:
        ckpt.wait()
    if reasons:
        checkpoint = str(last_checkpoint) if last_checkpoint is not None else None
        log(event="preempted", step=step, reasons=reasons, checkpoint=checkpoint)
        if cfg.checkpoint_dir is not None and env.is_main:
            payload = {"step": step, "reasons": reasons, "checkpoint": checkpoint}
            write_marker(cfg.checkpoint_dir, PREEMPTED_MARKER, payload)
        return RunResult(step, True, None)

    digest = params_sha256(model, env.cpu_group, hashes=first_of_stage(mesh) if mesh is not None else env.is_main)
    log(event="done", step=step, params_sha256=digest)
    if cfg.checkpoint_dir is not None and env.is_main:
        write_marker(cfg.checkpoint_dir, DONE_MARKER, {"step": step, "params_sha256": digest})
    return RunResult(step, False, digest)


def _checkpointer(
    cfg: TrainConfig, env: DistEnv, model: nn.Module, optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> Checkpointer | None:  # fmt: skip
    if cfg.checkpoint_dir is None:
        return None
    state = TrainingState(cfg.checkpoint_dir, cfg.keep_checkpoints, env, model, optimizer, scheduler)
    return XlaCheckpointer(state) if env.is_xla else DcpCheckpointer(state, asynchronous=cfg.async_checkpoint)
