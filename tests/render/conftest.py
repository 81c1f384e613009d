"""Fixtures for running rendered job scripts: see tests/render/standins.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.render.standins import JobSandbox, job_sandbox


@pytest.fixture
def sandbox(tmp_path: Path) -> JobSandbox:
    """Stand-ins for srun, scontrol, torchrun, neuron_parallel_compile and enroot; the real flock."""
    require_tool("flock", "apt-get install util-linux")
    return job_sandbox(tmp_path)
