"""The twin of each shipped stack, brought up once per test session and shared by the journey modules (pytest runs
every test of one stack's twin, then the next's)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.twin.cluster import Twin
from tests.conftest import require_slurm, unavailable
from tests.plan.fixtures import shipped_plan

# Each stack's researcher: a declared user in an account every partition of the stack admits.
USERS = {"dev": "dev", "prod": "alice"}
# Every pod's users can enter it (pytest's own tmp is root's alone, 0700).
STATE_ROOT = Path("/var/tmp/slurm-eks-twin-tests")


@pytest.fixture(scope="session", params=sorted(USERS))
def stack_twin(request: pytest.FixtureRequest) -> Iterator[tuple[str, Twin]]:
    require_slurm()
    if os.geteuid() != 0:
        unavailable("the twin runs pods in network namespaces: run as root")
    STATE_ROOT.mkdir(mode=0o755, exist_ok=True)
    twin = Twin(shipped_plan(request.param), STATE_ROOT / request.param)
    twin.up()
    try:
        yield request.param, twin
    finally:
        twin.down()
