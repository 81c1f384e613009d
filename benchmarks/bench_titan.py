"""torchtitan's mixture-of-experts on this machine's GPUs through jobs/recipes/titan.py: tokens/s and peak memory,
and what the CPU cannot show of the recipe's contract: a stop mid-run saves a checkpoint and writes PREEMPTED, and
the rerun resumes from it and ends with DONE.

    python benchmarks/bench_titan.py [--config qwen3_moe_debug] [--steps 40] [--stop-at 20]

Needs CUDA, torch 2.11 or newer and torchtitan 0.3.0 in this python (jobs/recipes/requirements-titan.txt, with
the CUDA torch). Expert parallelism spans every GPU (`--parallelism.expert_parallel_degree` = the GPU count, which
must divide the experts: 64 for the debug model). torchtitan's debug configs read a tokenizer and a dataset from
its source tree (tests/assets), which its wheel leaves out: this writes both into a scratch directory (a
byte-level BPE trained on generated text, within the debug model's 2,048-token vocabulary, and a JSON-lines
dataset of that text). Prints one JSON line: the device, the GPUs, the median tokens/s a GPU and the peak reserved
memory torchtitan logged, the step the stop landed on and the step the rerun started from.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECIPE = REPO / "jobs" / "recipes" / "titan.py"
VOCAB = 2000  # under the debug models' 2,048 (torchtitan/models/qwen3/__init__.py _debugmodel_moe)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# torchtitan/components/metrics.py MetricsProcessor.log: "step: 10  loss: ...  memory: 1.23GiB(1.5%)  tps: 12,345"
METRICS = re.compile(r"step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>[-\d.]+).*?memory:\s*(?P<memory>[\d.]+)GiB.*?"
                     r"tps:\s*(?P<tps>[\d,]+)")
STARTS = re.compile(r"Training starts at step (\d+)")


def write_assets(root: Path, lines: int = 4000, seed: int = 0) -> tuple[Path, Path]:
    """(tokenizer directory, dataset directory) for torchtitan's HuggingFaceTokenizer and its `c4_test` loader."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # torchtitan's dependency

    rng = random.Random(seed)
    words = ["expert", "router", "token", "layer", "shard", "gradient", "node", "slurm", "train", "batch", "mesh"]
    text = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 80))) for _ in range(lines)]
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer_dir, dataset_dir = root / "tokenizer", root / "dataset"
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    dataset_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(tokenizer_dir / "tokenizer.json"))
    (tokenizer_dir / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "add_bos_token": True}))
    (dataset_dir / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in text))
    return tokenizer_dir, dataset_dir


def metrics(log: str) -> list[dict[str, float]]:
    """torchtitan's logged steps: step, loss, peak reserved GiB, tokens/s a GPU."""
    return [{"step": int(m["step"]), "loss": float(m["loss"]), "memory_gib": float(m["memory"]),
             "tps": float(m["tps"].replace(",", ""))} for m in METRICS.finditer(ANSI.sub("", log))]


def gpu_count() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit("bench_titan.py needs NVIDIA GPUs (nvidia-smi lists none)")
    return len(out.stdout.strip().splitlines())


def gpu_name() -> str:
    """The first GPU's name (gpu_count has made sure there is one)."""
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    return out.stdout.splitlines()[0].strip()


def run(flags: list[str], job: Path, stop_at: int | None, gpus: int) -> str:
    """One torchrun of the recipe; with `stop_at`, touch the stop file once that step is logged."""
    stop_file = job.parent / "STOP"
    env = {**os.environ, "SLURM_EKS_CHECKPOINT_DIR": str(job), "SLURM_EKS_STOP_FILE": str(stop_file)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}", str(RECIPE),
           *flags]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    log = []
    for line in proc.stdout:  # type: ignore[union-attr]
        log.append(line)
        if stop_at is not None and any(m["step"] >= stop_at for m in metrics(line)):
            stop_file.touch()
    if proc.wait() != 0:
        raise SystemExit(f"torchrun exited {proc.returncode}:\n{''.join(log)[-4000:]}")
    return "".join(log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--module", default="qwen3")
    parser.add_argument("--config", default="qwen3_moe_debug")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--stop-at", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5, help="logged steps left out of the median")
    args = parser.parse_args()
    gpus = gpu_count()
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer_dir, dataset_dir = write_assets(Path(scratch))
        job = Path(scratch) / "job"
        flags = ["--module", args.module, "--config", args.config, "--hf_assets_path", str(tokenizer_dir),
                 "--dataloader.dataset_path", str(dataset_dir), "--training.steps", str(args.steps),
                 "--checkpoint.interval", str(10 * args.steps), "--parallelism.expert_parallel_degree", str(gpus)]
        flags += ["--training.disable_cuda_graphs"] if gpus > 1 else []
        first = run(flags, job, args.stop_at, gpus)
        preempted = json.loads((job / "PREEMPTED").read_text())
        second = run(flags, job, None, gpus)
        done = json.loads((job / "DONE").read_text())
    steps = metrics(first) + metrics(second)
    rates = [m["tps"] for m in steps if m["step"] > args.warmup]
    starts = [int(s) for s in STARTS.findall(second)]
    print(json.dumps({
        "config": f"{args.module}/{args.config}", "gpus": gpus,
        "device": gpu_name(),
        "tokens_per_s_per_gpu": statistics.median(rates) if rates else None,
        "peak_reserved_gib": max((m["memory_gib"] for m in steps), default=None),
        "preempted_step": preempted["step"], "resumed_from": starts[0] - 1 if starts else None,
        "done_step": done["step"],
    }))


if __name__ == "__main__":
    main()
