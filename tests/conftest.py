"""Shared fixtures: where the repository and the upstream reference material (../shared) live."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SLURM_EKS_SHARED", REPO.parent / "shared"))


def require_shared(sub: str) -> Path:
    """Return ../shared/<sub>; skip (naming what is missing) without it, fail under CI=true."""
    path = SHARED / sub
    if not path.exists():
        reason = f"{path} is missing: the upstream CRD schemas and notes live in ../shared beside the repo"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def crds_dir() -> Path:
    return require_shared("crds")


def require_tool(name: str) -> str:
    """The path of a command the tests need; skip (naming it) without it, fail under CI=true."""
    path = shutil.which(name)
    if path is None:
        reason = f"`{name}` is not installed (make test installs it: apt-get install {name})"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path
