"""`make golden`: rewrite tests/golden/<stack>/ from the current program (objects copied from upstream manifests as
digests: tests/golden/upstream_stubs.py). Review the diff before committing."""

from __future__ import annotations

from pathlib import Path

from components.config.stackfile import available_stacks
from scripts.offline.plan import run_plan
from tests.golden.upstream_stubs import write_golden

GOLDEN = Path(__file__).resolve().parent


def main() -> None:
    for stack in available_stacks():
        plan, _ = run_plan(stack)
        write_golden(plan, GOLDEN / stack)
        print(f"tests/golden/{stack}: {len(plan.resources)} resources, {len(plan.manifests())} manifests")


if __name__ == "__main__":
    main()
