"""The plan of each shipped stack equals its golden copy in tests/golden/ (refresh with `make golden`)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from components.stackfile import available_stacks
from scripts.offline.plan import run_plan, write_plan

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stack", available_stacks())
def test_plan_matches_golden(stack: str, tmp_path: Path) -> None:
    plan, _ = run_plan(stack)
    write_plan(plan, tmp_path)
    want, got = _files(GOLDEN / stack), _files(tmp_path)
    assert sorted(got) == sorted(want), "files differ from tests/golden: run `make golden` and review the diff"
    for name, text in got.items():
        if text != want[name]:
            diff = "".join(difflib.unified_diff(want[name].splitlines(True), text.splitlines(True),
                                                f"golden/{stack}/{name}", f"plan/{name}", n=2))
            pytest.fail(f"{name} differs from golden (run `make golden` if intended):\n{diff[:4000]}")


def test_plans_are_deterministic() -> None:
    # Twelve runs alternate stacks in one process: the same bytes each time (no flaky event loops,
    # no random IDs, no ordering drift).
    seen: dict[str, set[str]] = {"dev": set(), "prod": set()}
    for i in range(12):
        stack = "dev" if i % 2 else "prod"
        plan, _ = run_plan(stack)
        seen[stack].add(plan.to_json())
    assert all(len(v) == 1 for v in seen.values())
