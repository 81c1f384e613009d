"""Where everything of the local cluster lives: one state directory, so deleting it starts afresh."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from slurm.local.installation import conf_dir

STATE_ENV = "SLURM_EKS_LOCAL_STATE"
REPO_ROOT = Path(__file__).resolve().parents[2]


def default_state_dir() -> Path:
    """`$SLURM_EKS_LOCAL_STATE`, else `<repo>/.local-slurm` (git-ignored)."""
    override = os.environ.get(STATE_ENV)
    return Path(override).expanduser().resolve() if override else REPO_ROOT / ".local-slurm"


@dataclass(frozen=True)
class SlurmdFiles:
    """What one slurmd writes: its spool directory, pidfile and log."""

    spool: Path
    pidfile: Path
    log: Path


@dataclass(frozen=True)
class StateLayout:
    """Paths under the state directory; nothing here touches the disk."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        return self.etc / "gres.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        return self.etc / "slurmdbd.conf"

    @property
    def ctld_state(self) -> Path:
        return self.root / "spool" / "slurmctld"

    def slurmd_files(self, node: str | None = None) -> SlurmdFiles:
        """The host's own slurmd (`node` None), else the slurmd of node `node`.

        With `node="%n"` these are the slurm.conf templates slurmd expands to its own node's files, so
        several slurmds on this host never share a pidfile, log or spool.
        """
        stem = "slurmd" if node is None else f"slurmd-{node}"
        return SlurmdFiles(self.root / "spool" / stem, self.run / f"{stem}.pid", self.log / f"{stem}.log")

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def fakedev(self) -> Path:
        return self.root / "fakedev"

    @property
    def munge(self) -> Path:
        """Owned by the munge user: munged refuses pid/log paths it does not own."""
        return self.root / "munge"

    @property
    def mysql(self) -> Path:
        """Owned by the mysql user; the accounting DB lives here, so a fresh state dir is a fresh DB."""
        return self.root / "mysql"

    @property
    def mysql_data(self) -> Path:
        return self.mysql / "data"

    @property
    def mysql_socket(self) -> Path:
        return self.mysql / "mysqld.sock"

    def system_links(self) -> dict[Path, Path]:
        """The file Slurm's clients read (in /etc/slurm or the build's etc) -> the generated file it must point at.
        Slurm clients (sbatch, squeue, ...) only look there."""
        return {conf_dir() / f.name: f for f in (self.slurm_conf, self.gres_conf, self.slurmdbd_conf)}

    @classmethod
    def owning(cls, slurm_conf: Path) -> StateLayout:
        """The layout a generated slurm.conf belongs to (inverse of `slurm_conf`)."""
        return cls(slurm_conf.parent.parent)
