"""CliSlurm with stand-in Slurm commands on PATH that print the real 22.05.8 captures (and answer as 22.05 does),
and the v0.0.44 capture shape 25.11's `scontrol show nodes --json` prints. The real commands against real
daemons: tests/integration/test_node_health.py."""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

import pytest

from slurm.agent.health.slurm_access import CliSlurm, SlurmError

DATA = Path(__file__).parent / "data"


def stand_in(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + f'echo "$0 $*" >> {shlex.quote(str(bin_dir / "calls"))}\n' + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def slurm_2205(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """scontrol / sinfo / sbatch / squeue / sacct as Slurm 22.05.8 answers them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    capture = bin_dir / "sinfo.json"
    capture.write_text((DATA / "sinfo-drained-22.05.json").read_text())
    # 22.05's scontrol has no --json: getopt's refusal on stderr, exit 1.
    stand_in(bin_dir, "scontrol", """case "$*" in
  *--json*) echo "scontrol: unrecognized option '--json'" >&2; exit 1;;
  update*) exit 0;;
esac
exit 1
""")
    stand_in(bin_dir, "sinfo", f'[ "$1" = --json ] && cat {shlex.quote(str(capture))}\n')
    stand_in(bin_dir, "sbatch", 'cat > /dev/null; echo "353"\n')
    stand_in(bin_dir, "squeue", """case "$3" in
  353) echo RUNNING;;
  *) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1;;
esac
""")
    stand_in(bin_dir, "sacct", '[ "$5" = 354 ] && echo "CANCELLED by 0"\nexit 0\n')
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def calls(bin_dir: Path) -> list[str]:
    return [line.split(" ", 1)[1] if " " in line else "" for line in (bin_dir / "calls").read_text().splitlines()]


@pytest.mark.parametrize(("capture", "drained", "check"), [
    ("sinfo-drained-22.05.json", True, "gpu-count"),
    ("sinfo-draining-22.05.json", False, "xid"),
    ("sinfo-person-drained-22.05.json", True, None),
])
def test_cli_falls_back_to_sinfo_on_2205(slurm_2205: Path, capture: str, drained: bool, check: str | None) -> None:
    (slurm_2205 / "sinfo.json").write_text((DATA / capture).read_text())
    (node,) = CliSlurm().nodes()
    assert node.name == "vm" and node.drained is drained and (node.check.check if node.check else None) == check
    assert calls(slurm_2205) == ["show nodes --json", "--json"]


def test_cli_does_not_fall_back_on_other_failures(slurm_2205: Path) -> None:
    stand_in(slurm_2205, "scontrol", 'echo "slurm_load_node error: Unable to contact slurm controller" >&2; exit 1\n')
    with pytest.raises(SlurmError, match="Unable to contact"):
        CliSlurm().nodes()


def test_cli_reads_2511_json(slurm_2205: Path) -> None:
    doc = shlex.quote(str(DATA / "nodes-v0.0.44.json"))
    stand_in(slurm_2205, "scontrol", f"cat {doc}\n")
    assert [n.name for n in CliSlurm().nodes()] == ["gpu-h100-0", "gpu-h100-1", "gpu-h100-2"]


def test_cli_drain_submit_and_job_state(slurm_2205: Path) -> None:
    cli = CliSlurm()
    cli.drain("vm", "slurm-eks: nccl: busbw 120 GB/s < 300")
    assert cli.submit("#!/bin/bash\ntrue\n", "gpu-h100", "gpu-h100-0", "slurm-eks-nccl") == 353
    assert cli.job_state(353) == "RUNNING"
    assert cli.job_state(354) == "CANCELLED"  # gone from squeue: sacct's end state
    assert cli.job_state(355) is None  # unknown to both
    assert calls(slurm_2205)[:2] == [
        "update nodename=vm state=drain reason=slurm-eks: nccl: busbw 120 GB/s < 300",
        "--parsable --partition=gpu-h100 --nodelist=gpu-h100-0 --job-name=slurm-eks-nccl"]
