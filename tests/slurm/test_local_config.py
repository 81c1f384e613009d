"""Config generation for the local cluster (pure functions: no daemons, no /etc)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from slurm.local import config
from slurm.local.errors import LocalSlurmError
from slurm.local.layout import STATE_ENV, StateLayout, default_state_dir
from slurm.local.node import NodeState, parse_show_node
from slurm.local.topology import NodeTopology, parse_slurmd_c

SLURMD_C = (
    "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\n"
    "UpTime=0-01:02:03\n"
)
NODE = NodeTopology(
    "vm", cpus=2, boards=1, sockets_per_board=1, cores_per_socket=2, threads_per_core=1, real_memory_mb=24105
)


def settings(text: str) -> dict[str, str]:
    """key=value lines of a Slurm config (the NodeName/PartitionName lines keyed by their first token)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_parse_slurmd_c_takes_the_full_topology() -> None:
    assert parse_slurmd_c(SLURMD_C, "vm") == NODE


def test_parse_slurmd_c_rejects_garbage() -> None:
    with pytest.raises(LocalSlurmError, match="slurmd -C"):
        parse_slurmd_c("fatal: no config", "vm")


def test_slurm_conf(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    conf = config.render_slurm_conf(layout, NODE)
    values = settings(conf)
    assert values["ClusterName"] == config.CLUSTER_NAME
    assert values["SlurmctldHost"] == "vm(127.0.0.1)"
    assert values["StateSaveLocation"] == str(tmp_path / "spool/slurmctld")
    assert values["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert "gres/gpu" in values["AccountingStorageTRES"]
    assert values["GresTypes"] == "gpu"
    assert values["ProctrackType"] == "proctrack/linuxproc" and values["TaskPlugin"] == "task/none"
    assert values["MailProg"] == "/bin/true" and values["MpiDefault"] == "none"
    assert values["AuthInfo"] == f"cred_expire={config.CRED_EXPIRE_S}"
    node_line = next(line for line in conf.splitlines() if line.startswith("NodeName="))
    for expected in ("CPUs=2", "SocketsPerBoard=1", "CoresPerSocket=2", "ThreadsPerCore=1", "Gres=gpu:2"):
        assert expected in node_line.split()
    assert f"RealMemory={24105 * 95 // 100}" in node_line.split()
    partition = next(line for line in conf.splitlines() if line.startswith("PartitionName="))
    assert partition.split()[:3] == ["PartitionName=cpu", "Nodes=vm", "Default=YES"]
    assert all(str(tmp_path) in value for key, value in values.items() if key.endswith(("File", "Dir")))


@pytest.mark.parametrize("debian", [True, False])
def test_dynamic_nodes_get_treewidth_only_from_debians_22_05(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, debian: bool
) -> None:
    """22.05 needs TreeWidth=65533 for dynamic nodes; the 25.11 build does not, and Slinky does not set it."""
    monkeypatch.setattr(config, "debian_slurm", lambda: debian)
    dynamic = config.DynamicNodes(("NodeSet=gpu Feature=gpu",), gpus=4)
    values = settings(config.render_slurm_conf(StateLayout(tmp_path), NODE, dynamic))
    assert values["MaxNodeCount"] == str(config.MAX_NODE_COUNT) and values["NodeSet"] == "gpu Feature=gpu"
    assert ("TreeWidth" in values) is debian
    assert "TreeWidth" not in settings(config.render_slurm_conf(StateLayout(tmp_path), NODE))


def test_gres_and_slurmdbd_conf(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    gres = config.render_gres_conf(layout, NODE)
    assert gres.splitlines() == ["AutoDetect=off", f"NodeName=vm Name=gpu File={tmp_path}/fakedev/gpu[0-1]"]
    dbd = settings(config.render_slurmdbd_conf(layout))
    assert dbd["StorageType"] == "accounting_storage/mysql"
    assert dbd["StoragePort"] == str(config.MARIADB_PORT)
    assert dbd["PidFile"] == str(tmp_path / "run/slurmdbd.pid")


def test_write_makes_fake_gpus_and_a_private_dbd_conf(tmp_path: Path) -> None:
    layout = StateLayout(tmp_path)
    config.write(layout, config.render(layout, NODE))
    assert [p.readlink() for p in sorted(layout.fakedev.iterdir())] == [Path("/dev/null")] * 2
    assert layout.slurmdbd_conf.stat().st_mode & 0o777 == 0o600
    assert "NodeName=vm" in layout.slurm_conf.read_text()
    config.write(layout, config.render(layout, NODE))  # rewriting over existing files is fine


def test_state_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "elsewhere"))
    assert default_state_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv(STATE_ENV)
    assert default_state_dir().name == ".local-slurm"
    assert StateLayout.owning(StateLayout(tmp_path).slurm_conf).root == tmp_path


@pytest.mark.parametrize(
    ("line", "state", "usable", "broken"),
    [
        ("NodeName=vm Arch=x86_64 CPUAlloc=0 State=IDLE ThreadsPerCore=1", "IDLE", True, False),
        ("NodeName=vm State=MIXED Partitions=cpu", "MIXED", True, False),
        ("NodeName=vm State=DOWN* Reason=Not responding [slurm@2026-01-01]", "DOWN*", False, False),
        ("NodeName=vm State=IDLE+DRAIN Reason=gres/gpu count reported lower [root@x]", "IDLE+DRAIN", False, True),
    ],
)
def test_parse_show_node(line: str, state: str, usable: bool, broken: bool) -> None:
    parsed = parse_show_node(line)
    assert parsed == NodeState("vm", state, parsed.reason)
    assert (parsed.usable, parsed.broken) == (usable, broken)
    if "Reason=" in line:
        assert parsed.reason == line.split("Reason=", 1)[1]


def test_a_state_directory_munge_cannot_enter_is_a_clear_error() -> None:
    # munged runs as user munge: a 0700 ancestor (`mktemp -d` makes one) stops it with "Permission denied".
    from slurm.local.daemons import _prepare_munge

    with tempfile.TemporaryDirectory(dir="/var/tmp") as base:  # /var/tmp and the base: others may enter
        Path(base).chmod(0o755)
        private = Path(base) / "private"
        private.mkdir(mode=0o700)
        with pytest.raises(LocalSlurmError, match=f"cannot enter {private} \\(mode 700\\).*chmod o\\+x {private}"):
            _prepare_munge(StateLayout(private / "checkout" / ".local-slurm"))
