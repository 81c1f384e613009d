"""What an evaluation found, written as JSON beside the checkpoint (`<checkpoint>.eval.json`), atomically: a
reader sees the previous file or the whole new one."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 1


@dataclass(frozen=True)
class Lineage:
    """Where the evaluated weights came from: recorded with the metrics and on the model version."""

    job_id: str | None = None  # the training job's Slurm id
    stack: str | None = None
    data: str | None = None  # the training data (a token file, a dataset), as the training run named it
    code_commit: str | None = None  # the checkout the job ran
    checkpoint_uri: str | None = None  # where the weights are kept (s3://... when the checkpoint store has them)

    def tags(self) -> dict[str, str]:
        return {f"slurm_eks.{k}": v for k, v in asdict(self).items() if v}


@dataclass(frozen=True)
class EvalResult:
    checkpoint: str  # the evaluated directory
    step: int | None
    metrics: dict[str, float]  # flat: perplexity, loss, <task>/<metric>
    lineage: Lineage = field(default_factory=Lineage)
    details: dict[str, Any] = field(default_factory=dict)  # what the metrics were computed on

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=1, sort_keys=True)


def result_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".eval.json")


def write_result(result: EvalResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(result.to_json() + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
