"""`packages.ensure_installed` reports its progress through a callback; apt-get is stubbed, never run."""

from __future__ import annotations

import re
import subprocess

import pytest

from slurm.local import packages
from slurm.local.errors import LocalSlurmError


@pytest.fixture
def apt(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Root, apt-get present, no Slurm built from source, slurm-wlm and munge missing until apt-get install has
    run."""
    commands: list[list[str]] = []
    installed = {"mariadbd", "slurmdbd", "apt-get"}

    def which(program: str, path: str | None = None) -> str | None:
        return f"/usr/sbin/{program}" if program in installed else None

    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        if command[:2] == ["apt-get", "install"]:
            installed.update({"slurmctld", "munged"})
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(packages.os, "geteuid", lambda: 0)
    monkeypatch.setattr(packages.installation, "slurm_prefix", lambda: None)
    monkeypatch.setattr(packages.shutil, "which", which)
    monkeypatch.setattr(packages.subprocess, "run", run)
    return commands


def test_install_reports_what_it_installs_and_how_long_it_took(apt: list[list[str]]) -> None:
    steps: list[str] = []
    assert packages.ensure_installed(on_step=steps.append) == ["slurm-wlm", "munge"]
    assert [c[:2] for c in apt] == [["apt-get", "update"], ["apt-get", "install"]]
    assert len(steps) == 2, steps
    assert "slurm-wlm, munge" in steps[0] and "apt-get" in steps[0] and "minute" in steps[0]
    assert re.fullmatch(r"installed slurm-wlm, munge in \d+ s", steps[1]), steps[1]


def test_install_without_a_callback_is_silent_and_still_installs(apt: list[list[str]]) -> None:
    assert packages.ensure_installed() == ["slurm-wlm", "munge"]


def test_nothing_missing_reports_nothing(apt: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packages, "missing_packages", lambda: [])
    steps: list[str] = []
    assert packages.ensure_installed(on_step=steps.append) == []
    assert steps == [] and apt == []


def test_a_failed_apt_get_reports_the_start_but_no_success(monkeypatch: pytest.MonkeyPatch,
                                                            apt: list[list[str]]) -> None:
    def failing(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 100, "", "E: Unable to locate package slurm-wlm")

    monkeypatch.setattr(packages.subprocess, "run", failing)
    steps: list[str] = []
    with pytest.raises(LocalSlurmError, match="Unable to locate package"):
        packages.ensure_installed(on_step=steps.append)
    assert len(steps) == 1 and steps[0].startswith("installing ")


def test_local_up_prints_the_steps_as_they_happen(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from typer.testing import CliRunner

    from scripts.cli import slurm as slurm_cli
    from scripts.cli.main import app
    from slurm.local import ClusterStatus

    def up(state_dir: object = None, on_step=None) -> ClusterStatus:
        assert on_step is not None, "`local up` must pass a printer for the install's progress"
        on_step("installing slurm-wlm, munge (apt-get update and install, a minute or two)")
        on_step("installed slurm-wlm, munge in 42 s")
        return ClusterStatus(tmp_path, (), None, ("munged",), ("slurm-wlm", "munge"))

    monkeypatch.setattr(slurm_cli.local, "up", up)
    result = CliRunner().invoke(app, ["local", "up"], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "installing slurm-wlm, munge (apt-get" in result.output
    assert "installed slurm-wlm, munge in 42 s" in result.output


def test_a_source_build_of_slurm_needs_no_slurm_package(apt: list[list[str]], monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: object) -> None:
    """With Slurm 25.11 built (make slurm), only munge is missing here: Debian's Slurm is never installed."""
    monkeypatch.setattr(packages.installation, "slurm_prefix", lambda: tmp_path)
    assert packages.missing_packages() == ["munge"]
    assert packages.ensure_installed() == ["munge"]
