"""A real MLflow tracking server (mlflow 3.17.2, the add-on's release) on a free port: SQLite behind it, artifacts
served by the server itself (--serve-artifacts is the default of `mlflow server`, mlflow/cli.py), as the add-on
serves them from S3. And a small jobs/train.py run whose checkpoints the tests evaluate."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import unavailable
from tests.jobs import runs
from tests.render.standins import free_port

MLFLOW = Path(sys.executable).with_name("mlflow")
SHAPE = ["--d-model", "32", "--n-heads", "2", "--n-layers", "2", "--seq-len", "16", "--vocab-size", "64"]
TRAINED = [*SHAPE, "--batch-size", "4", "--steps", "12", "--checkpoint-every", "6", "--warmup-steps", "2",
           "--keep-checkpoints", "2", "--log-every", "1"]  # fmt: skip


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not MLFLOW.is_file():
        unavailable(f"{MLFLOW} is missing: the dev extra installs mlflow (make setup-extras)")
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = (root / "server.log").open("w")
    proc = subprocess.Popen([str(MLFLOW), "server", "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
                             "--artifacts-destination", str(root / "artifacts"), "--host", "127.0.0.1",
                             "--port", port, "--workers", "1"], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(the job's checkpoint directory, its log, the final parameters' SHA-256) of a 12-step run on one worker."""
    root = tmp_path_factory.mktemp("trained")
    job = root / "tiny-7"
    run = runs.torchrun(job, TRAINED, python=sys.executable, nproc=1, timeout=180)
    assert run.rc == 0, run.stderr[-3000:]
    log = root / "tiny-7.out"
    log.write_text("".join(f"[0]: {__import__('json').dumps(e)}\n" for e in run.events))
    return job, log, str(run.last("done")["params_sha256"])


def copy_job(job: Path, where: Path) -> Path:
    target = where / job.name
    shutil.copytree(job, target)
    return target
