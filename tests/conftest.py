"""Shared fixtures: where the repository and the upstream reference material (../shared) live, and how a
test says that something it needs is missing."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from scripts.manifests.manifest_schema import SchemaRegistry

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SLURM_EKS_SHARED", REPO.parent / "shared"))


def unavailable(reason: str) -> NoReturn:
    """Skip, naming what is missing; under CI=true a missing dependency is a failure, never a skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_shared(sub: str) -> Path:
    """Return ../shared/<sub>."""
    path = SHARED / sub
    if not path.exists():
        unavailable(f"{path} is missing: the upstream CRD schemas and notes live in ../shared beside the repo")
    return path


@pytest.fixture(scope="session")
def crds_dir() -> Path:
    """The CRDs `make crds` downloaded and verified (build/crds), else the upstream copies in ../shared/crds."""
    fetched = REPO / "build" / "crds"
    return fetched if fetched.is_dir() else require_shared("crds")


@pytest.fixture(scope="session")
def crd_registry(crds_dir: Path) -> SchemaRegistry:
    """Every upstream CRD, parsed once per session (about 1.5 s of YAML)."""
    return SchemaRegistry.from_crd_dirs([crds_dir])


def require_tool(name: str, hint: str | None = None) -> str:
    """The path of a command the tests need, on PATH or in this venv's bin."""
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        unavailable(f"`{name}` is not installed ({hint or f'make test installs it: apt-get install {name}'})")
    return path


def require_module(name: str, hint: str) -> ModuleType:
    """Import a module the tests need (at module level: pytest.skip/fail apply to the whole file)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        unavailable(f"{name} is not installed ({hint})")
