"""Shared fixtures: where the repository and the upstream reference material (../shared) live, how a
test says that something it needs is missing, and the real local Slurm for tests marked `slurm`.

Tests marked `@pytest.mark.slurm` get the local Slurm (`slurm.local.up()`, once per session) automatically.
Under CI=true a cluster that cannot come up fails the tests; elsewhere they are skipped with the reason. The
cluster is left running (a second session finds it up and goes on at once).
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

from components import upstream
from scripts.manifests.manifest_schema import SchemaRegistry
from slurm import local
from slurm.local import installation
from slurm.local.packages import missing_packages
from tests import slurm_openapi

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SLURM_EKS_SHARED", REPO.parent / "shared"))
# Every Slurm program a test runs (sbatch, scontrol, ... and the daemons) is the 25.11 the cluster runs, built by
# `make slurm` (tools/build_slurm.sh), never Debian's 22.05.
SLURM_PREFIX = installation.slurm_prefix()
if SLURM_PREFIX is not None:
    os.environ["PATH"] = os.pathsep.join([str(SLURM_PREFIX / "bin"), str(SLURM_PREFIX / "sbin"), os.environ["PATH"]])


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


@pytest.fixture(scope="session", autouse=True)
def _upstream_cache() -> None:
    """The upstream files the program reads (the MPI Operator's release manifest), in build/upstream as `make
    upstream` leaves them: copied from ../shared/upstream, SHA-256 checked, when missing (never downloaded). Without
    ../shared, a plan that needs one stops with the fix, as a user's would."""
    upstream.fill(mirror=SHARED / "upstream" if (SHARED / "upstream").is_dir() else None, download=False)


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


def require_slurm() -> Path:
    """The Slurm 25.11 build the tests run."""
    if SLURM_PREFIX is None:
        unavailable("Slurm 25.11 is not built: `make slurm` builds it from ../shared/upstream/slurm into build/slurm")
    return SLURM_PREFIX  # type: ignore[return-value]


def slurmrestd_description() -> dict[str, Any]:
    """slurmrestd's OpenAPI description of data_parser v0.0.44, generated from the Slurm 25.11 build
    (tests/slurm_openapi.py); no build, or a slurmrestd that cannot generate it, skips (fails under CI=true)."""
    prefix = require_slurm()
    try:
        return slurm_openapi.load(prefix)
    except slurm_openapi.SpecError as exc:
        unavailable(f"slurmrestd's OpenAPI description could not be generated: {exc}")


@pytest.fixture(scope="session")
def slurmrestd_openapi() -> dict[str, Any]:
    """slurmrestd 25.11's OpenAPI description (data_parser v0.0.44), generated once per session."""
    return slurmrestd_description()


def _local_slurm_unavailable() -> str | None:
    if SLURM_PREFIX is None:
        return "Slurm 25.11 is not built: `make slurm` builds it from ../shared/upstream/slurm into build/slurm"
    if os.geteuid() != 0:
        return "the local Slurm needs root (it starts munge, MariaDB and the Slurm daemons)"
    missing = missing_packages()
    if missing and shutil.which("apt-get") is None:
        return f"Slurm packages {', '.join(missing)} are missing and apt-get is not available"
    return None


@pytest.fixture(scope="session")
def local_slurm() -> Iterator[local.ClusterStatus]:
    """The local Slurm for the `slurm` tests. What the session started it stops at the end, so the machine is left
    as found: a cluster left running would hold Slurm's ports, and the next run from another checkout (CI's fresh
    clone) would be refused. A cluster that was already running (a developer's) is left running."""
    reason = _local_slurm_unavailable()
    if reason:
        unavailable(reason)
    try:
        status = local.up()
    except local.LocalSlurmError as exc:
        unavailable(f"the local Slurm did not come up: {exc}")
        raise
    yield status
    if status.started:
        local.down(status.state_dir)


@pytest.fixture(autouse=True)
def _local_slurm_for_marked_tests(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("slurm") is not None:
        request.getfixturevalue("local_slurm")
