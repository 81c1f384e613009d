"""Tokens/s and MFU of one node-local training run of a model preset, ready for the moment a GPU is there.

    python benchmarks/bench_gpu.py --model llama3-1b --seq-len 8192 --batch-size 1 -- --activation-checkpointing

runs `jobs/train.py` under torchrun on every GPU of the machine (FSDP2 over them, bf16 compute), skips the
first `--warmup` logged intervals (compilation, allocator growth), and prints one JSON line: the device, the
median tokens/s over the rest and the MFU against the device's dense bf16 peak (jobs/training/peaks.py) using the
preset's FLOPs per token (jobs/training/presets.py: torchtitan's formula). Flags after `--` go to the entry
point unchanged (`--tp 2`, `--compile`, ...). No checkpoints are written. Every worker builds the model on the meta
device and allocates and initialises its own shards only (jobs/training/materialize.py); 1B is the default. Without
a GPU, `--device cpu` runs the same plumbing on gloo and reports tokens/s with "mfu": null (the CPU has no peak to
measure against). torchtitan's mixture-of-experts: benchmarks/bench_titan.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.training.config import CHECKPOINT_DIR_ENV, STOP_FILE_ENV
from jobs.training.peaks import PEAK_BF16_FLOPS
from jobs.training.presets import PRESETS

TRAIN = Path(__file__).resolve().parent.parent / "jobs" / "train.py"


def gpu_name() -> str | None:
    """The first GPU's name from nvidia-smi (no CUDA context in this process), None without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    names = out.strip().splitlines()
    return names[0].strip() if names else None


def peak_flops(device_name: str | None) -> float | None:
    return next((p for key, p in PEAK_BF16_FLOPS.items() if device_name and key in device_name), None)


def summarise(events: list[dict[str, object]], warmup: int, flops_per_token: int, peak: float | None,
              devices: int) -> dict[str, object]:
    """Median tokens/s over the logged intervals after `warmup`, and the MFU it gives."""
    rates = [float(e["tokens_per_s"]) for e in events if "tokens_per_s" in e][warmup:]  # type: ignore[arg-type]
    if not rates:
        raise SystemExit(f"no step was logged after the {warmup} warm-up intervals: raise --steps")
    tokens_per_s = statistics.median(rates)
    mfu = tokens_per_s * flops_per_token / (peak * devices) if peak else None
    return {"tokens_per_s": round(tokens_per_s, 1), "tokens_per_s_range": [round(min(rates), 1), round(max(rates), 1)],
            "intervals": len(rates), "mfu": round(mfu, 4) if mfu is not None else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(PRESETS), default="llama3-1b")
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=1, help="sequences per GPU per micro-step")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1, help="logged intervals left out of the median")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--nproc", type=int, help="workers (default: every GPU; 2 on the CPU)")
    parser.add_argument("extra", nargs="*", help="entry point flags, after --")
    args = parser.parse_args(argv)
    name = gpu_name() if args.device == "cuda" else None
    if args.device == "cuda" and name is None:
        raise SystemExit("no GPU (nvidia-smi found none): run on a GPU node, or --device cpu to check the plumbing")
    nproc = args.nproc or (int(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count(
        "GPU ")) if name else 2)
    shape = PRESETS[args.model]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", str(TRAIN),
           "--model", args.model, "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size), "--steps",
           str(args.steps), "--log-every", str(args.log_every), "--warmup-steps", "1", "--fsdp", "--device",
           args.device, *args.extra]
    # Inside a job the script's checkpoint directory and stop file would apply: not to a benchmark.
    env = {k: v for k, v in os.environ.items() if k not in (CHECKPOINT_DIR_ENV, STOP_FILE_ENV)}
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env, "OMP_NUM_THREADS": "1"})
    if done.returncode != 0:
        raise SystemExit(f"the run failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    result = summarise(events, args.warmup, shape.flops_per_token(args.seq_len), peak_flops(name), nproc)
    print(json.dumps({"model": args.model, "device": name or "cpu", "workers": nproc, "seq_len": args.seq_len,
                      "batch_size": args.batch_size, "extra": args.extra, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
