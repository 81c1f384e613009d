"""`job submit --local` says what it will install and start as root before doing it, and asks: `--yes`, or a yes at
a terminal; anything else does nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from scripts.cli import slurm as slurm_cli
from scripts.cli.main import app

PENDING = (["munge", "mariadb-server"], ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the command did: local.up and the submission, recorded instead of done."""
    done: list[str] = []
    monkeypatch.setattr(slurm_cli.local, "pending", lambda: PENDING)
    monkeypatch.setattr(slurm_cli.local, "up", lambda **_: done.append("up"))
    monkeypatch.setattr(slurm_cli.client, "submit", lambda *_: done.append("submit") or 7)
    return done


def _submit(tmp_path: Path, *flags: str, stdin: str | None = None) -> tuple[int, str]:
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\nhostname\n")
    result = CliRunner().invoke(app, ["job", "submit", str(script), "--local", *flags], input=stdin,
                                env={"COLUMNS": "300"})
    return result.exit_code, result.output


def test_without_yes_and_without_a_terminal_nothing_is_installed_or_started(tmp_path: Path, calls: list[str]) -> None:
    code, output = _submit(tmp_path)
    assert code == 1 and calls == []
    assert ("this will install munge, mariadb-server with apt-get, then start munged, mariadbd, slurmdbd, slurmctld, "
            "slurmd as root on this machine") in output
    assert "give --yes to allow it, or start it first with `slurm-eks local up`" in output


def test_yes_goes_on(tmp_path: Path, calls: list[str]) -> None:
    code, output = _submit(tmp_path, "--yes")
    assert code == 0 and calls == ["up", "submit"] and "submitted job 7" in output


def test_a_no_at_the_terminal_does_nothing_and_a_yes_goes_on(
    tmp_path: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slurm_cli, "_at_a_terminal", lambda: True)
    code, output = _submit(tmp_path, stdin="n\n")
    assert code == 1 and calls == [] and "nothing was installed or started" in output
    code, _ = _submit(tmp_path, stdin="y\n")
    assert code == 0 and calls == ["up", "submit"]


def test_an_up_cluster_is_used_without_asking(tmp_path: Path, calls: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_cli.local, "pending", lambda: ([], []))
    code, output = _submit(tmp_path)
    assert code == 0 and calls == ["up", "submit"] and "this will" not in output
