"""`slurm-eks local|job ...` end to end on the local cluster (typer's runner, real Slurm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from scripts.cli.slurm import job_app, local_app

pytestmark = pytest.mark.slurm

app = typer.Typer()
app.add_typer(local_app, name="local")
app.add_typer(job_app, name="job")
runner = CliRunner()


def test_local_up_is_a_no_op_when_up() -> None:
    result = runner.invoke(app, ["local", "up"])
    assert result.exit_code == 0, result.output
    assert "already up" in result.output
    assert runner.invoke(app, ["local", "status"]).exit_code == 0


def test_submit_status_logs(tmp_path: Path) -> None:
    script = tmp_path / "cli.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --job-name=from-cli\necho cli-says-hi\n")
    output = str(tmp_path / "%x-%j.out")
    submitted = runner.invoke(app, ["job", "submit", str(script), "--local", "-o", output, "--requeue"])
    assert submitted.exit_code == 0, submitted.output
    job_id = re.search(r"submitted job (\d+)", submitted.output).group(1)
    followed = runner.invoke(app, ["job", "logs", job_id, "--follow"])
    assert followed.exit_code == 0 and followed.output == "cli-says-hi\n"
    status = runner.invoke(app, ["job", "status", job_id], env={"COLUMNS": "200"})
    assert status.exit_code == 0 and "COMPLETED" in status.output and "from-cli" in status.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["job", "cancel", "99999999"], "Invalid job id"),
        (["job", "status", "99999999"], "unknown to slurmctld and to accounting"),
        (["job", "submit", "/no/such/script.sbatch"], "does not exist"),
        (["job", "status", "--backend", "nope"], "unknown job backend"),
    ],
)
def test_errors_are_one_line_and_non_zero(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
