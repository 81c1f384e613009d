"""Overheads of the training entry point (run on demand: `python benchmarks/bench_train.py`).

1. Step time of jobs/training's train step (DDP wrapper, data loader, grad clipping, lr schedule,
   autocast on GPU) against a bare forward/backward/AdamW loop on the same model and batch shape.
2. Wall time of a default training run with checkpoints at the default interval against the same run
   without checkpoints.

One process (a one-rank group), on CUDA when available, else CPU. Prints one JSON line per measurement.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.distributed as dist

from jobs.training.config import TrainConfig, parse_args
from jobs.training.data import BatchLoader, SyntheticTokens
from jobs.training.distributed import init_distributed
from jobs.training.model import GPT
from jobs.training.optim import build_optimizer, build_scheduler
from jobs.training.parallelize import parallelize
from jobs.training.trainer import make_train_step, train


def _median_step_seconds(step: Callable[[], object], device: torch.device, warmup: int, iters: int) -> float:
    times = []
    for i in range(warmup + iters):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_step(cfg: TrainConfig, warmup: int, iters: int) -> dict[str, object]:
    env = init_distributed()
    try:
        torch.manual_seed(cfg.seed)
        model = parallelize(
            GPT(cfg.model),
            env,
            fsdp=cfg.fsdp,
            activation_checkpointing=cfg.activation_checkpointing,
            compile_blocks=cfg.compile,
        )
        optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, env.device)
        scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)
        loader = BatchLoader(SyntheticTokens(cfg.model.vocab_size, cfg.seed), cfg.batch_size, cfg.model.seq_len, 0, 1)
        entry = _median_step_seconds(
            make_train_step(model, optimizer, scheduler, loader, cfg, env.device), env.device, warmup, iters
        )

        torch.manual_seed(cfg.seed)
        bare_model = GPT(cfg.model).to(env.device)
        bare_model.activation_checkpointing = cfg.activation_checkpointing
        if cfg.compile:
            for block in bare_model.blocks:
                block.compile()
        bare_opt = torch.optim.AdamW(bare_model.parameters(), lr=cfg.lr, fused=env.device.type == "cuda")
        inputs, targets = (t.to(env.device) for t in loader.next())
        autocast = (
            (lambda: torch.autocast("cuda", dtype=torch.bfloat16))
            if env.device.type == "cuda"
            else contextlib.nullcontext
        )

        def bare_step() -> None:
            with autocast():
                loss = bare_model(inputs, targets)
            loss.backward()
            bare_opt.step()
            bare_opt.zero_grad(set_to_none=True)

        bare = _median_step_seconds(bare_step, env.device, warmup, iters)
    finally:
        dist.destroy_process_group()
    return {
        "bench": "train_step",
        "device": str(env.device),
        "entry_point_ms": round(entry * 1e3, 3),
        "bare_loop_ms": round(bare * 1e3, 3),
        "ratio": round(entry / bare, 3),
    }


def bench_checkpoint(argv: list[str], repeats: int) -> dict[str, object]:
    def wall(extra: list[str]) -> float:
        best = float("inf")
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                cfg = parse_args(argv + [a.replace("{tmp}", tmp) for a in extra])
                start = time.perf_counter()
                train(cfg)
                best = min(best, time.perf_counter() - start)
        return best

    without = wall([])
    with_ckpt = wall(["--checkpoint-dir", "{tmp}/ckpt"])
    cfg = parse_args(argv)
    return {
        "bench": "checkpoint_overhead",
        "steps": cfg.steps,
        "checkpoint_every": cfg.checkpoint_every,
        "without_s": round(without, 3),
        "with_s": round(with_ckpt, 3),
        "ratio": round(with_ckpt / without, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before timing")
    p.add_argument("--iters", type=int, default=30, help="timed steps (median reported)")
    p.add_argument("--repeats", type=int, default=2, help="runs per checkpoint setting (best kept)")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="train.py flags after --, e.g. -- --d-model 256")
    args = p.parse_args()
    train_args = [a for a in args.train_args if a != "--"]
    cfg = parse_args(train_args)
    print(json.dumps(bench_step(cfg, args.warmup, args.iters)), flush=True)
    # train() logs its own JSON lines; ours are the ones with a "bench" key.
    print(json.dumps(bench_checkpoint(train_args, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
