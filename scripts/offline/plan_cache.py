"""Offline plans kept between commands: `validate --crds`, `plan`, `check`, `policy`, `cost`, `preview`, `up` and
`destroy` each plan the stack, 10-30 s a time; a cached plan is reused when nothing it was made from has changed.

The key is everything a plan is a function of: the stack's name and file, the code that runs under the mocks (every
file of components/, slurm/, jobs/ and scripts/offline/, __main__.py, Pulumi.yaml, pyproject.toml) and the installed
versions of the Pulumi SDK and providers and pydantic. Entries are written by rename (a reader never sees half of
one) into build/plan-cache/, the newest KEEP kept. Only the console script turns the cache on (scripts/cli/entry.py
sets SLURM_EKS_PLAN_CACHE=1 unless it is set): a test that changes the program in-process always plans afresh;
SLURM_EKS_PLAN_CACHE=0 turns it off."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from components.config.stackfile import PROJECT_ROOT
from scripts.offline.plan_model import Plan

ENV = "SLURM_EKS_PLAN_CACHE"
CACHE_DIR = PROJECT_ROOT / "build" / "plan-cache"
KEEP = 24
CODE = ("components", "slurm", "jobs", "scripts/offline", "__main__.py", "Pulumi.yaml", "pyproject.toml")
PACKAGES = ("pulumi", "pulumi-aws", "pulumi-eks", "pulumi-kubernetes", "pulumi-random", "pulumi-docker-build",
            "pydantic")

# What the command line shows while a plan is made (set by scripts/cli/entry.py; engines never print).
on_planning: Callable[[str], None] | None = None


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for entry in CODE:
        path = root / entry
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                      and p.suffix not in (".pyc", ".pyo")]
    return sorted(found)


def key(stack: str, stack_path: Path, root: Path = PROJECT_ROOT) -> str:
    digest = hashlib.sha256()
    digest.update(f"{stack}\0{sys.version}\0".encode())
    digest.update(stack_path.read_bytes())
    for name in PACKAGES:
        try:
            digest.update(f"\0{name}={version(name)}".encode())
        except PackageNotFoundError:
            digest.update(f"\0{name}=-".encode())
    for path in _files(root):
        digest.update(f"\0{path.relative_to(root)}\0".encode())
        digest.update(path.read_bytes())
    return f"{stack}-{digest.hexdigest()[:32]}"


def load(entry: str, directory: Path | None = None) -> Plan | None:
    path = (directory or CACHE_DIR) / f"{entry}.json"
    try:
        return Plan.from_json(path.read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing, or unreadable: plan again


def save(entry: str, plan: Plan, directory: Path | None = None) -> None:
    """Keep `plan`; a cache that cannot be written is no error (the plan was made, only not kept)."""
    directory = directory or CACHE_DIR
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".", suffix=".json", dir=directory)
        with os.fdopen(handle, "w") as stream:
            stream.write(plan.to_json())
        os.replace(temporary, directory / f"{entry}.json")
        entries = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        return


def planning(stack: str) -> None:
    if on_planning is not None:
        on_planning(f"planning stack {stack} offline under Pulumi's mocks (10-30 s; kept in {CACHE_DIR} for the "
                    "next command)")
