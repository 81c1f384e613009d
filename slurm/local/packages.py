"""Install the Debian packages the local cluster needs, only when one is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable

from slurm.local import installation
from slurm.local.errors import LocalSlurmError

# package -> a program it provides; a missing program means the package must be installed.
REQUIRED = {
    "munge": "munged",
    "mariadb-server": "mariadbd",
}
# Debian's Slurm, needed only when no source build of Slurm is there (slurm/local/installation.py).
DEBIAN_SLURM = {
    "slurm-wlm": "slurmctld",
    "slurmdbd": "slurmdbd",
}


def missing_packages() -> list[str]:
    wanted = REQUIRED if installation.slurm_prefix() else {**DEBIAN_SLURM, **REQUIRED}
    path = installation.search_path()
    return [package for package, program in wanted.items() if shutil.which(program, path=path) is None]


def ensure_installed(on_step: Callable[[str], None] | None = None) -> list[str]:
    """apt-get install what is missing (update first, only then); return what was installed.

    `on_step` hears, in one line each, that the (slow, silent) install starts and how long it took; the
    engine itself prints nothing.
    """
    report = on_step or (lambda _message: None)
    missing = missing_packages()
    if not missing:
        return []
    if os.geteuid() != 0:
        raise LocalSlurmError(f"packages {', '.join(missing)} are missing and installing them needs root")
    if shutil.which("apt-get") is None:
        raise LocalSlurmError(f"packages {', '.join(missing)} are missing and apt-get is not available")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    report(f"installing {', '.join(missing)} (apt-get update and install, a minute or two)")
    started = time.monotonic()
    for command in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
    ):
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise LocalSlurmError(f"`{' '.join(command)}` failed:\n    " + "\n    ".join(output))
    still_missing = missing_packages()
    if still_missing:
        raise LocalSlurmError(f"installed {', '.join(missing)} but {', '.join(still_missing)} still missing")
    report(f"installed {', '.join(missing)} in {time.monotonic() - started:.0f} s")
    return missing
