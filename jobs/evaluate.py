"""Evaluate a checkpoint: `python jobs/evaluate.py [flags] [-- training flags]` (`--help` lists them).

- A jobs/train.py checkpoint (`--checkpoint DIR`: a step-<n> directory, or the job's directory for its newest
  complete one): perplexity on held-out tokens (`--eval-data`, a token file of `slurm-eks data prepare`; synthetic
  tokens from an unused seed without it). The model's shape comes from the training flags after `--` (the same
  --model or shape flags the run trained with).
- A Hugging Face-format directory (`--hf-model DIR`): lm-evaluation-harness `--tasks`, and `--heldout-text
  FILE.jsonl` as held-out perplexity.
The metrics go to `<checkpoint>.eval.json` beside it (JSON, written atomically) and, with `--registry-uri`, to the
cluster's MLflow as a run and a version of `--registered-model` with its lineage (jobs/evaluation/registry.py).
`--training-log` adds the training run's losses from its Slurm output file. Exit 0 on success, 2 on a checkpoint,
data or request that cannot be evaluated (one line with the fix), 1 when the registry refuses.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jobs.checkpoint_layout import complete_checkpoints, is_complete, step_of
from jobs.evaluation.results import EvalResult, Lineage, result_path, write_result

RANK_PREFIX = "]: "  # the job scripts prefix each worker's line with "[<rank>]: "


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evaluate.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--checkpoint", type=Path, help="a jobs/train.py step-<n> directory, or a job's directory")
    what.add_argument("--hf-model", type=Path, help="a Hugging Face-format model directory (save_pretrained)")
    p.add_argument("--eval-data", type=Path, help="held-out token file (default: synthetic, from an unused seed)")
    p.add_argument("--eval-dtype", choices=("uint16", "uint32"), default="uint16")
    p.add_argument("--eval-windows", type=int, default=64, help="held-out windows of seq-len tokens (default 64)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--tasks", default="", help="lm-eval tasks, comma-separated (with --hf-model)")
    p.add_argument("--heldout-text", type=Path, help="JSON lines with a \"text\" field (with --hf-model)")
    p.add_argument("--limit", type=int, default=None, help="lm-eval: at most this many documents a task")
    p.add_argument("--device", default=None, help="default: cuda when there is a GPU, else cpu")
    p.add_argument("--out", type=Path, help="the metrics' file (default: <checkpoint>.eval.json beside it)")
    p.add_argument("--registry-uri", default=os.environ.get("MLFLOW_TRACKING_URI"),
                   help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI; unset: no registry)")
    p.add_argument("--registered-model", default=None, help="model name in the registry (default: the job's name)")
    p.add_argument("--training-log", type=Path, help="the training job's output file: its losses go to the run")
    p.add_argument("--job-id", default=os.environ.get("SLURM_EKS_TRAINING_JOB_ID"), help="lineage: training job")
    p.add_argument("--stack", default=os.environ.get("SLURM_EKS_STACK"), help="lineage: the stack")
    p.add_argument("--checkpoint-uri", default=os.environ.get("SLURM_EKS_CHECKPOINT_URI"),
                   help="lineage: where the weights are kept (s3://..., the checkpoint store's prefix of the job)")
    p.add_argument("--code-commit", default=None, help="lineage (default: the git commit of this checkout)")
    return p


def _events(log: Path | None) -> list[dict]:
    if log is None:
        return []
    events = []
    for line in log.read_text(errors="replace").splitlines():
        text = line.split(RANK_PREFIX, 1)[1] if line.startswith("[") and RANK_PREFIX in line else line
        if text.startswith("{"):
            try:
                events.append(json.loads(text))
            except ValueError:
                continue
    return events


def _code_commit() -> str | None:
    try:
        from mlflow.utils.git_utils import get_git_commit
    except ImportError:
        return None
    return get_git_commit(str(Path(__file__).resolve().parent))


def _newest(checkpoint: Path) -> Path:
    if is_complete(checkpoint) or step_of(checkpoint.name) is not None:
        return checkpoint
    found = complete_checkpoints(checkpoint)
    if not found:
        from jobs.evaluation.perplexity import EvaluationError

        raise EvaluationError(f"{checkpoint} has no complete checkpoint: give a step-<n> directory")
    return found[-1].path


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    training_flags = argv[argv.index("--") + 1:] if "--" in argv else []
    args = _parser().parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    import torch

    from jobs.evaluation.perplexity import EvaluationError

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    events = _events(args.training_log)
    start = next((e for e in events if e.get("event") == "start"), {})
    try:
        if args.checkpoint is not None:
            from jobs.evaluation.perplexity import held_out, load_model, perplexity
            from jobs.training.config import parse_args

            checkpoint = _newest(args.checkpoint)
            cfg = parse_args([*training_flags, "--device", "cpu"]).model
            model = load_model(checkpoint, cfg, torch.device(device))
            found = perplexity(model, held_out(args.eval_data, args.eval_dtype, cfg), args.eval_windows,
                               args.batch_size, torch.device(device))  # fmt: skip
            metrics = {"loss": found.loss, "perplexity": found.perplexity}
            details = {"tokens": found.tokens, "windows": found.windows, "model": cfg.name,
                       "eval_data": str(args.eval_data) if args.eval_data else "synthetic"}  # fmt: skip
        else:
            from jobs.evaluation.harness import evaluate_harness

            checkpoint = args.hf_model
            tasks = [t for t in args.tasks.split(",") if t]
            metrics, details = evaluate_harness(args.hf_model, tasks, args.heldout_text, args.limit,
                                                args.batch_size, device)  # fmt: skip
        lineage = Lineage(job_id=args.job_id, stack=args.stack, data=start.get("data"),
                          code_commit=args.code_commit or _code_commit(), checkpoint_uri=args.checkpoint_uri and
                          f"{args.checkpoint_uri.rstrip('/')}/{checkpoint.name}")  # fmt: skip
        result = EvalResult(str(checkpoint), step_of(checkpoint.name), metrics, lineage, details)
        out = write_result(result, args.out or result_path(checkpoint))
    except EvaluationError as exc:
        print(f"evaluate.py: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"event": "evaluated", "checkpoint": str(checkpoint), "metrics": metrics, "file": str(out)}),
          flush=True)  # fmt: skip
    if args.registry_uri:
        from jobs.evaluation.registry import register

        name = args.registered_model or checkpoint.parent.name.rsplit("-", 1)[0] or "model"
        try:
            done = register(result, args.registry_uri, name, events, {"checkpoint": str(checkpoint)})
        except Exception as exc:  # the registry's own errors (MlflowException, requests'): one line, exit 1
            print(f"evaluate.py: registering {name} at {args.registry_uri} failed: {exc}", file=sys.stderr)
            return 1
        print(json.dumps({"event": "registered", "model": done.model, "version": done.version,
                          "run_id": done.run_id, "source": done.source}), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
