"""The local cluster's topology.conf (slurm/local/config.py): written beside the generated slurm.conf, linked
where Slurm reads it, and gone again when a config without one is written back."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm.local import config
from slurm.local.errors import LocalSlurmError
from slurm.local.layout import StateLayout
from slurm.local.topology import NodeTopology

NODE = NodeTopology("vm", cpus=2, boards=1, sockets_per_board=1, cores_per_socket=2, threads_per_core=1,
                    real_memory_mb=24105)


@pytest.fixture
def system_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A stand-in for /etc/slurm."""
    directory = tmp_path / "etc-slurm"
    directory.mkdir()
    monkeypatch.setattr(config, "conf_dir", lambda: directory)
    return directory


def test_written_linked_read_back_and_removed(system_dir: Path, tmp_path: Path) -> None:
    layout = StateLayout(tmp_path / "state")
    config.write(layout, config.render(layout, NODE, topology_conf="SwitchName=s Nodes=vm\n"))
    link = system_dir / "topology.conf"
    assert link.readlink() == layout.etc / "topology.conf"
    assert link.read_text() == "SwitchName=s Nodes=vm\n"
    assert config.read(layout).topology_conf == "SwitchName=s Nodes=vm\n"

    config.write(layout, config.render(layout, NODE))
    assert not link.is_symlink()
    assert not (layout.etc / "topology.conf").exists()
    assert config.read(layout).topology_conf is None


def test_someone_elses_topology_conf_is_left_alone(system_dir: Path, tmp_path: Path) -> None:
    layout = StateLayout(tmp_path / "state")
    (system_dir / "topology.conf").write_text("theirs\n")
    config.write(layout, config.render(layout, NODE))  # no topology of ours: nothing to do there
    with pytest.raises(LocalSlurmError, match="regular file"):
        config.write(layout, config.render(layout, NODE, topology_conf="SwitchName=s Nodes=vm\n"))
    assert (system_dir / "topology.conf").read_text() == "theirs\n"
