"""The real local Slurm for integration tests: brought up once per session by `slurm.local.up()`.

Tests marked `@pytest.mark.slurm` get it automatically. Under CI=true a cluster that cannot come up fails
the tests; elsewhere they are skipped with the reason. The cluster is left running (a second session
finds it up and goes on at once).
"""

from __future__ import annotations

import os
import shutil

import pytest

from slurm import local
from slurm.local.packages import missing_packages
from tests.conftest import unavailable


def _unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "the local Slurm needs root (it starts munge, MariaDB and the Slurm daemons)"
    missing = missing_packages()
    if missing and shutil.which("apt-get") is None:
        return f"Slurm packages {', '.join(missing)} are missing and apt-get is not available"
    return None


@pytest.fixture(scope="session")
def local_slurm() -> local.ClusterStatus:
    reason = _unavailable_reason()
    if reason:
        unavailable(reason)
    try:
        return local.up()
    except local.LocalSlurmError as exc:
        unavailable(f"the local Slurm did not come up: {exc}")
        raise


@pytest.fixture(autouse=True)
def _local_slurm_for_marked_tests(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("slurm") is not None:
        request.getfixturevalue("local_slurm")
