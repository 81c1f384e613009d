"""`slurm-eks job image pull`: the job scripts' image import, run now on the login pod (enroot there is a
stand-in, tests/render/standins.py) or submitted as a one-node job (a fake job backend)."""

from __future__ import annotations

import getpass
from collections.abc import Iterable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from jobs import render
from jobs.render import container_image
from scripts.cli import slurm as slurm_cli
from scripts.cli.main import app
from slurm.backend import SubmitOptions
from slurm.jobinfo import JobInfo
from tests.conftest import require_tool
from tests.render.standins import JobSandbox, job_sandbox

NEURON_IMAGE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04"


class RecordingBackend:
    name = "fake"

    def __init__(self) -> None:
        self.submitted: list[tuple[str, SubmitOptions]] = []

    def submit(self, script: Path, options: SubmitOptions) -> int:
        self.submitted.append((script.read_text(), options))
        return 77

    def queue(self) -> list[JobInfo]:
        raise AssertionError

    def accounting(self, job_ids: Iterable[int]) -> list[JobInfo]:
        raise AssertionError

    def cancel(self, job_id: int) -> None:
        raise AssertionError

    def requeue(self, job_id: int) -> None:
        raise AssertionError


@pytest.fixture
def sandbox(tmp_path: Path) -> JobSandbox:
    require_tool("flock", "apt-get install util-linux")
    return job_sandbox(tmp_path)


@pytest.fixture
def shared(sandbox: JobSandbox, monkeypatch: pytest.MonkeyPatch) -> Path:
    """/shared moved into the sandbox, whose enroot stand-in is on PATH."""
    monkeypatch.setattr(render, "SHARED", str(sandbox.shared))
    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    return sandbox.shared


def pull(*args: str) -> Result:
    return CliRunner().invoke(app, ["job", "image", "pull", *args], env={"NO_COLOR": "1"})


def test_pull_imports_the_partition_image_once(sandbox: JobSandbox, shared: Path) -> None:
    file = container_image(NEURON_IMAGE, str(shared)).file(getpass.getuser())
    first = pull("--stack", "prod", "--partition", "trainium")
    assert first.exit_code == 0, first.output
    assert [c["argv"][-1] for c in sandbox.calls("enroot")] == [
        "docker://public.ecr.aws#neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04"]
    assert Path(file).exists()
    assert pull("--stack", "prod", "--partition", "trainium").exit_code == 0
    assert len(sandbox.calls("enroot")) == 1


def test_pull_of_another_image_is_another_file(sandbox: JobSandbox, shared: Path) -> None:
    result = pull("-s", "prod", "-p", "gpu-h100", "--image", "ghcr.io/me/train:2")
    assert result.exit_code == 0, result.output
    assert Path(container_image("ghcr.io/me/train:2", str(shared)).file(getpass.getuser())).exists()


def test_a_failed_pull_exits_1_and_leaves_no_file(sandbox: JobSandbox, shared: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_ENROOT_FAIL", "1")
    result = pull("-s", "prod", "-p", "trainium")
    assert result.exit_code == 1 and "error: the import failed (exit 1)" in result.output
    assert [p.suffix for p in (shared / "images" / getpass.getuser()).iterdir()] == [".lock"]  # no image, whole or half


def test_without_enroot_the_error_says_where_to_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_cli.shutil, "which", lambda name: None)
    result = pull("-s", "prod", "-p", "trainium")
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: enroot is not on PATH here: run `slurm-eks job image pull` on the login pod, where enroot is "
        "installed, or add --submit to import on a node of partition trainium")


def test_submit_runs_the_same_import_as_a_one_node_job(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = RecordingBackend()
    monkeypatch.setattr(slurm_cli.client, "select_backend", lambda name=None: backend)
    result = pull("-s", "prod", "-p", "trainium", "--submit")
    assert result.exit_code == 0, result.output
    # The log is in the submitter's own directory (--output=/shared/logs/%u/..., Slurm's %u: the user name).
    user = getpass.getuser()
    assert "submitted job 77" in result.output and f"/shared/logs/{user}/image-pull-77.out" in result.output
    ((script, _),) = backend.submitted
    for line in ("#SBATCH --partition=trainium", "#SBATCH --nodes=1", "import_image() {",
                 "import_image 'docker://public.ecr.aws#neuron/pytorch-training-neuronx:"
                 "2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04' \"${SLURM_EKS_IMAGE}\"",
                 'SLURM_EKS_IMAGE="$(own_directory /shared/images)/'
                 f'{container_image(NEURON_IMAGE, "/shared").name}.sqsh"'):
        assert line in script, line


def test_pull_refuses_what_it_cannot_pull() -> None:
    squashfs = pull("-s", "prod", "-p", "gpu-h100", "--image", "/shared/mine.sqsh")
    assert squashfs.exit_code == 2
    assert "--image /shared/mine.sqsh is already a squashfs file; there is nothing to pull" in squashfs.output
    unknown = pull("-s", "prod", "-p", "gpu-h10")
    assert unknown.exit_code == 2 and "did you mean 'gpu-h100'?" in unknown.output
