"""The real tracking server (mlflow 3.17.2, the add-on's release, from the dev extra) run with the commands the
Deployment gives it (the schema step, then the server): only its listening address and port differ, its backend is
SQLite (the `in-cluster` form) and its S3 is moto's server. The Host check admits the tracking URI's name and
refuses others (a pod's address included), the health probe passes whatever the Host, and artifacts logged through
the proxy land under the configured prefix, at the keys the deploy check's IAM model uses, and come back."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from components.addons.mlflow import JOB_EXECUTION, MIGRATE, server_command
from components.config.mlflow import Mlflow
from components.names import MLFLOW_HOST, MLFLOW_PORT
from tests.conftest import require_module
from tests.s3_server import moto_s3

pytestmark = pytest.mark.slow  # a server process that takes several seconds to start

boto3 = require_module("boto3", "a runtime dependency")
mlflow_client = require_module("mlflow", "the dev extra (mlflow, the add-on's release)")

BUCKET, REGION = "ml-data", "us-west-2"
ARTIFACTS = f"s3://{BUCKET}/mlflow"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
START_SECONDS = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """moto's S3 server with the bucket; yields its endpoint."""
    with moto_s3(BUCKET, REGION) as endpoint:
        yield endpoint


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}


def get(port: int, path: str, host: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.fixture(scope="module")
def server(s3: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`mlflow server` with the Deployment's command, on 127.0.0.1 and a free port; yields the port."""
    work = tmp_path_factory.mktemp("mlflow")
    command = server_command(Mlflow(artifacts=ARTIFACTS, database="in-cluster"))
    port = free_port()
    command[command.index("--host") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(port)
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    env = {**os.environ, **CREDENTIALS, "HOME": str(work), "MLFLOW_S3_ENDPOINT_URL": s3,
           "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{work}/mlflow.db",
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": JOB_EXECUTION}
    # The init container's schema step first (its `python` is this venv's).
    subprocess.run([sys.executable, *MIGRATE[1:]], cwd=work, env=env, check=True, capture_output=True,
                   timeout=START_SECONDS)
    with closing(sqlite3.connect(work / "mlflow.db")) as db:  # the schema made, at a revision (alembic's table)
        assert db.execute("SELECT version_num FROM alembic_version").fetchone()
    log = (work / "server.log").open("w")
    # its own process group: the CLI starts uvicorn and its workers as children, all stopped together below
    process = subprocess.Popen([str(mlflow_bin), *command[1:]], cwd=work, env=env, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_SECONDS
        while get_or_none(port) != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not come up:\n{(work / 'server.log').read_text()[-4000:]}")
            time.sleep(0.5)
        yield port
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def get_or_none(port: int) -> int | None:
    try:
        return get(port, "/health", "localhost")
    except OSError:
        return None


SEARCH = "/api/2.0/mlflow/experiments/search?max_results=1"


def test_the_tracking_uris_host_is_admitted_and_others_are_refused(server: int) -> None:
    assert get(server, SEARCH, f"{MLFLOW_HOST}:{MLFLOW_PORT}") == 200
    assert get(server, SEARCH, "mlflow.attacker.example:5000") == 403  # DNS rebinding
    # The defaults admit any private address; ours replace them (3.17.2's "10.*" even matched names like 10.evil.com)
    assert get(server, SEARCH, "10.0.12.34:5000") == 403
    assert get(server, "/health", "anything.example") == 200  # the probes' path is exempt


def test_artifacts_go_through_the_server_under_the_prefix(server: int, s3: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The client holds no S3 credentials or endpoint: the server writes S3.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "MLFLOW_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    mlflow_client.set_tracking_uri(f"http://localhost:{server}")
    note = tmp_path / "note.txt"
    note.write_text("trained")
    with mlflow_client.start_run() as run:
        mlflow_client.log_metric("loss", 0.25)
        mlflow_client.log_artifact(str(note), "notes")
    info = run.info
    assert info.artifact_uri == f"mlflow-artifacts:/{info.experiment_id}/{info.run_id}/artifacts"
    listing = boto3.client("s3", endpoint_url=s3, region_name=REGION, **_keys()).list_objects_v2(Bucket=BUCKET)
    # the layout scripts/checks/iam_requests.py MLFLOW_RUN_PATH models: <prefix>/<experiment>/<run>/artifacts/...
    assert [o["Key"] for o in listing["Contents"]] == [
        f"mlflow/{info.experiment_id}/{info.run_id}/artifacts/notes/note.txt"]
    back = mlflow_client.artifacts.download_artifacts(run_id=info.run_id, artifact_path="notes/note.txt",
                                                      dst_path=str(tmp_path / "back"))
    assert Path(back).read_text() == "trained"
    assert mlflow_client.get_run(info.run_id).data.metrics == {"loss": 0.25}
