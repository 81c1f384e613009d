"""The model registry: an evaluated checkpoint becomes a run (the training's losses, the evaluation's metrics and
result file, lineage tags) and a version of a registered model in the cluster's MLflow (the add-on:
components/addons/mlflow.py), through MLflow's own client (mlflow-skinny).

A version's source must be a location MLflow accepts: the server refuses a local path outside the run's artifacts
(mlflow 3.17.2 mlflow/server/handlers.py `_validate_source_run`). With the checkpoint store the source is the
checkpoint's S3 prefix; without, it is the run's `checkpoint` artifact, a pointer file naming the directory on
/shared (the weights are never copied into MLflow)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.evaluation.perplexity import EvaluationError
from jobs.evaluation.results import EvalResult

EXPERIMENT = "slurm-eks"


@dataclass(frozen=True)
class Registered:
    run_id: str
    model: str
    version: str
    source: str


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError as exc:
        raise EvaluationError(f"the MLflow client is not installed ({exc}): pip install mlflow-skinny==3.17.2, or "
                              "drop --registry-uri") from None  # fmt: skip
    return mlflow


def training_metrics(events: Iterable[dict[str, Any]]) -> list[tuple[int, str, float]]:
    """(step, metric, value) of a training log's step events (jobs/train.py's JSON lines: loss, lr, grad_norm,
    tokens_per_s, mfu)."""
    rows = []
    for e in events:
        if "loss" in e and isinstance(e.get("step"), int):
            rows += [(e["step"], k, float(v)) for k, v in e.items()
                     if k not in ("step", "event") and isinstance(v, (int, float)) and not isinstance(v, bool)]
    return rows


def register(result: EvalResult, tracking_uri: str, model_name: str, training_log: list[dict[str, Any]],
             params: dict[str, str] | None = None) -> Registered:  # fmt: skip
    """One run with everything, and a new version of `model_name` pointing at the checkpoint."""
    mlflow = _mlflow()
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(EXPERIMENT)
    tags = {**result.lineage.tags(), "slurm_eks.checkpoint": result.checkpoint,
            "mlflow.runName": f"{Path(result.checkpoint).parent.name}/{Path(result.checkpoint).name}"}
    run = client.create_run(experiment_id, tags=tags)
    run_id = run.info.run_id
    try:
        metrics = [Metric(f"train/{k}", v, 0, step) for step, k, v in training_metrics(training_log)]
        metrics += [Metric(f"eval/{k}", v, 0, result.step or 0) for k, v in sorted(result.metrics.items())]
        all_params = [Param(k, str(v)[:6000]) for k, v in sorted((params or {}).items())]
        for i in range(0, len(metrics), 1000):  # log_batch takes at most 1000 metrics a call (MLflow REST API)
            client.log_batch(run_id, metrics=metrics[i:i + 1000], params=all_params if i == 0 else [])
        if not metrics and all_params:
            client.log_batch(run_id, params=all_params)
        with tempfile.TemporaryDirectory() as scratch:
            result_file = Path(scratch) / "evaluation.json"
            result_file.write_text(result.to_json())
            client.log_artifact(run_id, str(result_file))
            source = result.lineage.checkpoint_uri
            if not source or not source.startswith("s3://"):
                pointer = Path(scratch) / "checkpoint" / "location.json"
                pointer.parent.mkdir()
                pointer.write_text(json.dumps({"path": result.checkpoint, "step": result.step}))
                client.log_artifacts(run_id, str(pointer.parent), "checkpoint")
                source = f"runs:/{run_id}/checkpoint"
        try:
            client.create_registered_model(model_name)
        except mlflow.exceptions.MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        version = client.create_model_version(model_name, source, run_id=run_id,
                                              tags={**result.lineage.tags(), "slurm_eks.step": str(result.step)})
        client.set_terminated(run_id, "FINISHED")
    except Exception:
        client.set_terminated(run_id, "FAILED")
        raise
    return Registered(run_id, model_name, str(version.version), source)
