"""Which Slurm the local cluster runs: Slurm 25.11 built from source (`make slurm`: build/slurm, or the prefix in
$SLURM_EKS_SLURM_PREFIX), the version the cluster runs, when there is one; else Debian's packages (22.05), which
`slurm-eks local up` installs for a user who has not built Slurm.

A source build reads its configuration from <prefix>/etc (configure --sysconfdir, tools/build_slurm.sh), Debian's
from /etc/slurm: the local cluster links its generated files there, so plain `sbatch` finds them.
"""

from __future__ import annotations

import os
from pathlib import Path

PREFIX_ENV = "SLURM_EKS_SLURM_PREFIX"
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILT = REPO_ROOT / "build" / "slurm"
DEBIAN_CONF_DIR = Path("/etc/slurm")


def slurm_prefix() -> Path | None:
    """The source-built Slurm to use, or None for Debian's."""
    configured = os.environ.get(PREFIX_ENV)
    prefix = Path(configured).expanduser().resolve() if configured else BUILT
    return prefix if (prefix / "sbin" / "slurmctld").exists() else None


def debian_slurm() -> bool:
    """Debian's 22.05 packages, not a source build: the local cluster works around 22.05's limits then."""
    return slurm_prefix() is None


def conf_dir() -> Path:
    """Where the Slurm in use looks for slurm.conf."""
    prefix = slurm_prefix()
    return prefix / "etc" if prefix else DEBIAN_CONF_DIR


def search_path() -> str:
    """PATH for finding Slurm's programs: the build's first, then PATH, then the system's sbin directories."""
    prefix = slurm_prefix()
    built = [str(prefix / "sbin"), str(prefix / "bin")] if prefix else []
    return os.pathsep.join([*built, os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def version_label() -> str:
    prefix = slurm_prefix()
    return f"Slurm built from source in {prefix}" if prefix else "Debian's Slurm packages"
