"""`python3 -m slurm.agent <agent>`: the image's entry point, and sackd started before the agent."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from slurm.agent import __main__ as entry
from slurm.agent import contract, sackd


def test_the_entry_point_offers_exactly_the_contracts_agents() -> None:
    done = subprocess.run([sys.executable, "-m", "slurm.agent", "--help"], capture_output=True, text=True,
                          check=True)
    assert "{lifecycle,accounts}" in done.stdout and contract.AGENTS == ("lifecycle", "accounts")
    wrong = subprocess.run([sys.executable, "-m", "slurm.agent", "repair"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "invalid choice: 'repair'" in wrong.stderr


def serve_socket(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    return server


def test_sackd_is_started_against_the_controller_and_waited_for(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    path = tmp_path / "sack.socket"

    def run(argv: list[str]) -> int:
        calls.append(argv)
        return 0

    def sleep(_: float) -> None:  # the socket appears while the agent waits
        serve_socket(path)

    sackd.start("slurm-controller.slurm:6817", socket=path, run=run, sleep=sleep)
    assert calls == [["sackd", "--conf-server", "slurm-controller.slurm:6817", "--disable-reconfig"]]


def test_sackd_that_never_serves_fails_with_the_controller_named(tmp_path: Path) -> None:
    with pytest.raises(sackd.SackdError, match=r"no configuration from ctl:6817 in 0 s"):
        sackd.start("ctl:6817", socket=tmp_path / "sack.socket", wait_seconds=0, run=lambda argv: 0,
                    sleep=lambda s: None)
    with pytest.raises(sackd.SackdError, match="exited with status 1"):
        sackd.start("ctl:6817", socket=tmp_path / "sack.socket", run=lambda argv: 1)


def test_the_agent_stops_with_the_reason_when_sackd_fails(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(conf_server: str) -> None:
        raise sackd.SackdError(f"no configuration from {conf_server} in 120 s")

    monkeypatch.setattr(sackd, "start", refuse)
    assert entry.main(["accounts", "--conf-server", "ctl:6817", "--desired", "/nonexistent"]) == 1
    assert capsys.readouterr().err == "error: no configuration from ctl:6817 in 120 s\n"


def test_the_accounts_agent_applies_the_document_it_is_given(tmp_path: Path) -> None:
    """Without sackd (no --conf-server), straight to the reconcile: a missing document is its error, exit 1."""
    done = subprocess.run([sys.executable, "-m", "slurm.agent", "accounts", contract.DESIRED_OPTION,
                           str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert done.returncode == 1 and "missing.json" in done.stderr
