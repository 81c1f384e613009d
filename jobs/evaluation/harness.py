"""lm-evaluation-harness (lm-eval 0.4.13) on a Hugging Face-format model directory: the tasks asked for by name
(they read their datasets from the Hugging Face hub or its cache), and held-out text from a JSON-lines file as a
rolling-loglikelihood task of our own, written as the harness's task YAML (the shape of its `wikitext` task:
lm_eval/tasks/wikitext/wikitext.yaml, output_type loglikelihood_rolling with word_perplexity, byte_perplexity and
bits_per_byte), so that perplexity needs no download."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import yaml

from jobs.evaluation.perplexity import EvaluationError

HELD_OUT_TASK = "slurm_eks_heldout"


def held_out_task(text_file: Path, directory: Path) -> Path:
    """A task YAML over `text_file` (JSON lines with a "text" field) in `directory`; returns the directory."""
    try:
        first = json.loads(text_file.read_text().splitlines()[0])
        if not isinstance(first.get("text"), str):
            raise ValueError('no "text" field')
    except (OSError, ValueError, IndexError, AttributeError) as exc:
        raise EvaluationError(f"--heldout-text {text_file}: not JSON lines with a \"text\" field ({exc})") from None
    task = {
        "task": HELD_OUT_TASK,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(text_file.resolve())}},
        "test_split": "test",
        "output_type": "loglikelihood_rolling",
        "doc_to_text": "",
        "doc_to_target": "{{text}}",
        "should_decontaminate": False,
        "metric_list": [{"metric": m} for m in ("word_perplexity", "byte_perplexity", "bits_per_byte")],
        "metadata": {"version": 1.0},
    }
    (directory / f"{HELD_OUT_TASK}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return directory


def evaluate_harness(model_dir: Path, tasks: list[str], held_out: Path | None, limit: int | None,
                     batch_size: int, device: str) -> tuple[dict[str, float], dict[str, Any]]:  # fmt: skip
    """Flat metrics `<task>/<metric>` and what they were computed on (the harness's versions and configs)."""
    if not (model_dir / "config.json").is_file():
        raise EvaluationError(f"{model_dir} is not a Hugging Face model directory (no config.json): the harness "
                              "takes save_pretrained's layout; a jobs/train.py checkpoint gets perplexity instead")
    try:
        import lm_eval
        from lm_eval.tasks import TaskManager
    except ImportError as exc:
        raise EvaluationError(f"lm-evaluation-harness is not installed ({exc}): pip install lm-eval==0.4.13") from None
    with tempfile.TemporaryDirectory(prefix="slurm-eks-tasks-") as scratch:
        names = list(tasks)
        include = None
        if held_out is not None:
            include = str(held_out_task(held_out, Path(scratch)))
            names.append(HELD_OUT_TASK)
        if not names:
            raise EvaluationError("no tasks: give --tasks NAME[,NAME] or --heldout-text FILE.jsonl")
        manager = TaskManager(include_path=include)
        unknown = [n for n in names if n not in manager.all_tasks]
        if unknown:
            raise EvaluationError(f"unknown lm-eval task(s) {', '.join(unknown)}: `lm-eval ls tasks` lists them")
        out = lm_eval.simple_evaluate(model="hf", model_args={"pretrained": str(model_dir)}, tasks=names,
                                      task_manager=manager, limit=limit, batch_size=batch_size, device=device,
                                      log_samples=False, bootstrap_iters=0)  # fmt: skip
    if out is None:  # simple_evaluate returns None on ranks other than 0
        return {}, {}
    metrics: dict[str, float] = {}
    for task, values in out["results"].items():
        for key, value in values.items():
            metric = key.split(",")[0]  # "word_perplexity,none": the metric, then its filter
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                metrics[f"{task}/{metric}"] = float(value)
    return metrics, {"versions": out.get("versions", {}), "n-samples": out.get("n-samples", {})}
