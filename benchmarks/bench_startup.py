"""Start-up of a sharded model: host memory and time per rank against the model and the world size (`make bench`).

A: the training entry point's way (jobs/training/materialize.py): the model built on the meta device, laid out
   with FSDP2 over every rank, then each rank allocates and initialises its own shards.
B: the way it was before: every rank builds and initialises the whole model, then shards it.

For each world size, A and B run interleaved (A B, then B A, ...) `--repeats` times, each a fresh torchrun on the
CPU (gloo), because a process's peak memory only grows. Each rank reports its peak resident memory over what it
held before building the model, and its seconds from build to a laid-out model; the worst rank counts. One JSON
line per world size: medians of A and B, B/A per round (min / median / max), and A's peak over this rank's shard
of the parameters (fp32), which stays flat as ranks are added while B's grows with the world size.

The model: `--dim 1024 --layers 8 --vocab 32000` is 159M parameters (636 MB in fp32), enough that the parameters,
not the interpreter, dominate; each rank runs one thread (OMP_NUM_THREADS=1), as a rank does on a shared CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MIB = 1024 * 1024


def worker(variant: str, dim: int, layers: int, vocab: int) -> None:
    import torch
    import torch.distributed as dist

    from jobs.training.config import ModelConfig
    from jobs.training.distributed import init_distributed
    from jobs.training.mesh import build_mesh, parallel_dims
    from jobs.training.model import Transformer
    from jobs.training.parallelize import parallelize
    from jobs.training.presets import ModelShape

    env = init_distributed("cpu")
    shape = ModelShape(dim=dim, n_layers=layers, n_heads=dim // 128, n_kv_heads=max(1, dim // 512),
                       ffn_dim=int(dim * 3.5), vocab_size=vocab)  # fmt: skip
    cfg = ModelConfig(shape, 128, 0.0)
    dims = parallel_dims(env.world_size, env.world_size, tp=1, pp=1, dp_replicate=1, fsdp=True)
    mesh = build_mesh(dims, "cpu")
    dist.barrier()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    start = time.perf_counter()
    if variant == "meta":
        with torch.device("meta"):
            model = Transformer(cfg, seed=0)
    else:
        model = Transformer(cfg, seed=0)
    parallelize(model, env, dims, mesh, activation_checkpointing=False, compile_blocks=False, n_microbatches=1)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    worst = torch.tensor([float(peak), seconds])
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    if env.is_main:
        print(json.dumps({"peak_bytes": int(worst[0]), "seconds": round(float(worst[1]), 3),
                          "params": shape.params()}), flush=True)  # fmt: skip
    dist.destroy_process_group()


def once(variant: str, world: int, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}", __file__,
           "--worker", variant, "--dim", str(args.dim), "--layers", str(args.layers), "--vocab", str(args.vocab)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          check=False, timeout=1800)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{variant} on {world} ranks failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def spread(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def compare(world: int, args: argparse.Namespace) -> dict[str, object]:
    a_runs, b_runs = [], []
    for round_ in range(args.repeats):
        order = [("meta", a_runs), ("whole", b_runs)]
        for variant, runs in (order[::-1] if round_ % 2 else order):
            runs.append(once(variant, world, args))
    params = a_runs[0]["params"]
    shard_bytes = params * 4 / world
    a_peak = [r["peak_bytes"] for r in a_runs]
    b_peak = [r["peak_bytes"] for r in b_runs]
    return {
        "bench": "startup", "ranks": world, "params": params, "shard_mib": round(shard_bytes / MIB),
        "a": "meta, then shard", "b": "whole, then shard",
        "a_peak_mib": round(statistics.median(a_peak) / MIB), "b_peak_mib": round(statistics.median(b_peak) / MIB),
        "peak_ratio_b_over_a": spread([b / a for a, b in zip(a_peak, b_peak, strict=True)]),
        "a_peak_over_shard": round(statistics.median(a_peak) / shard_bytes, 2),
        "b_peak_over_shard": round(statistics.median(b_peak) / shard_bytes, 2),
        "a_s": statistics.median(r["seconds"] for r in a_runs), "b_s": statistics.median(r["seconds"] for r in b_runs),
        "time_ratio_b_over_a": spread([b["seconds"] / a["seconds"] for a, b in zip(a_runs, b_runs, strict=True)]),
        "repeats": args.repeats,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=("meta", "whole"), help=argparse.SUPPRESS)
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.dim, args.layers, args.vocab)
        return
    for world in args.ranks:
        print(json.dumps(compare(world, args)), flush=True)


if __name__ == "__main__":
    main()
