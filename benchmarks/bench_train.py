"""What the training entry point's choices cost, as A/B ratios with their spread (`make bench`).

Each comparison runs A and B interleaved (A B, then B A, ...) over `--repeats` rounds, so drift in the
machine's load hits both alike, and prints one JSON line: the median seconds of each and the B/A ratio per
round as min / median / max.

1. step: jobs/training's train step (data loader, grad clipping, lr schedule, autocast on GPU) against a
   bare forward/backward/AdamW loop on the same model and batch, one process.
2. stop_check: whole training runs under torchrun with 2 ranks (gloo on the CPU, NCCL on GPUs), so the
   collective counts: the stop check every step (B) against every 10 steps (A; the entry point's default is
   time-based, about every 10 s, jobs/training/cadence.py).
3. checkpoint: the same runs with a checkpoint every 5 steps, saved synchronously (B) against in the
   background with dcp.async_save (A, the default); the last checkpoint is always waited for.

Run times are read from the runs' own JSON events (first "start" to "done"), so process start-up and the
rendezvous are left out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
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
from jobs.training.model import Transformer
from jobs.training.optim import build_optimizer, build_scheduler
from jobs.training.parallelize import parallelize
from jobs.training.trainer import layout, make_train_step

TRAIN = Path(__file__).resolve().parent.parent / "jobs" / "train.py"


def spread(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def interleaved(repeats: int, a: Callable[[], float], b: Callable[[], float]) -> dict[str, object]:
    """Seconds of A and B over `repeats` rounds, alternating which goes first; B/A per round."""
    a_s, b_s = [], []
    for round_ in range(repeats):
        if round_ % 2:
            b_s.append(b())
            a_s.append(a())
        else:
            a_s.append(a())
            b_s.append(b())
    return {"a_s": round(statistics.median(a_s), 4), "b_s": round(statistics.median(b_s), 4),
            "ratio_b_over_a": spread([y / x for x, y in zip(a_s, b_s, strict=True)]), "repeats": repeats}


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


def bench_step(cfg: TrainConfig, warmup: int, iters: int, repeats: int) -> dict[str, object]:
    env = init_distributed()
    try:
        dims, mesh = layout(cfg, env)
        torch.manual_seed(cfg.seed)
        par = parallelize(Transformer(cfg.model), env, dims, mesh, activation_checkpointing=False,
                          compile_blocks=False, n_microbatches=cfg.grad_accum)  # fmt: skip
        optimizer = build_optimizer(par.model, cfg.lr, cfg.weight_decay, env.device)
        scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.steps, cfg.min_lr_ratio)
        tokens = SyntheticTokens(cfg.model.shape.vocab_size, cfg.seed)
        loader = BatchLoader(tokens, cfg.batch_size, cfg.model.seq_len, 0, 1)
        entry_step = make_train_step(par, optimizer, scheduler, loader, cfg, env)

        torch.manual_seed(cfg.seed)
        bare_model = Transformer(cfg.model).to(env.device)
        bare_opt = torch.optim.AdamW(bare_model.parameters(), lr=cfg.lr, fused=env.device.type == "cuda")
        inputs, targets = (t.to(env.device) for t in loader.next())
        cuda = env.device.type == "cuda"
        autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if cuda else contextlib.nullcontext

        def bare_step() -> None:
            with autocast():
                loss = bare_model(inputs, targets)
            loss.backward()
            bare_opt.step()
            bare_opt.zero_grad(set_to_none=True)

        result = interleaved(
            repeats,
            lambda: _median_step_seconds(bare_step, env.device, warmup, iters),
            lambda: _median_step_seconds(entry_step, env.device, warmup, iters),
        )
    finally:
        dist.destroy_process_group()
    return {"bench": "step", "device": str(env.device), "a": "bare loop", "b": "entry point", **result}


def run_seconds(flags: list[str], nproc: int) -> float:
    """Seconds from the run's "start" event to its "done" event, under torchrun with `nproc` ranks."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               str(TRAIN), *[f.replace("{tmp}", tmp) for f in flags]]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    times = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            times.setdefault(event.get("event"), event["time"])
    if done.returncode != 0 or "done" not in times:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return float(times["done"] - times["start"])


def bench_runs(name: str, base: list[str], a: list[str], b: list[str], repeats: int, nproc: int) -> dict[str, object]:
    result = interleaved(repeats, lambda: run_seconds(base + a, nproc), lambda: run_seconds(base + b, nproc))
    return {"bench": name, "ranks": nproc, "a": " ".join(a) or "defaults", "b": " ".join(b), **result}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before timing (step bench)")
    p.add_argument("--iters", type=int, default=30, help="timed steps per round, median kept (step bench)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds per comparison")
    p.add_argument("--ranks", type=int, default=2, help="torchrun workers for the whole-run comparisons")
    p.add_argument("train_args", nargs=argparse.REMAINDER, help="train.py flags after --, e.g. -- --d-model 256")
    args = p.parse_args()
    train_args = [a for a in args.train_args if a != "--"]
    print(json.dumps(bench_step(parse_args(train_args), args.warmup, args.iters, args.repeats)), flush=True)
    runs = [*train_args, "--steps", "60", "--warmup-steps", "5", "--log-every", "60"]
    print(json.dumps(bench_runs("stop_check", runs, ["--stop-check-every", "10"], ["--stop-check-every", "1"],
                                args.repeats, args.ranks)), flush=True)  # fmt: skip
    ckpt = [*runs, "--checkpoint-dir", "{tmp}/ckpt", "--checkpoint-every", "5"]
    print(json.dumps(bench_runs("checkpoint", ckpt, [], ["--no-async-checkpoint"], args.repeats, args.ranks)),
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
