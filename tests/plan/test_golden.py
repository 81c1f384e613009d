"""The plan of each shipped stack equals its golden copy in tests/golden/ (refresh with `make golden`)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pytest

from components.config.stackfile import available_stacks
from scripts.offline.plan import run_plan
from tests.golden.upstream_stubs import write_golden

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
# Keys whose change a reviewer must check against the promises in README.md and docs/ (tests/test_promises.py).
SAFETY_KEYS = frozenset({
    "disruption", "expireAfter", "metadataOptions", "blockDeviceMappings", "encrypted", "storageEncrypted",
    "protect", "retain_on_delete", "deletionProtection", "skipFinalSnapshot", "publiclyAccessible",
    "endpointPublicAccess", "endpointPrivateAccess", "publicAccessCidrs", "encryptionConfigKeyArn",
    "updateStrategy", "workloadDisruptionProtection", "persistence", "reclaimPolicy", "deploymentType",
    "loadBalancerSourceRanges", "replicas", "minReplicaCount",
})


def _changed(old: Any, new: Any, path: str = "") -> list[str]:
    """Paths where two JSON values differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [c for k in sorted(old.keys() | new.keys())
                for c in _changed(old.get(k), new.get(k), f"{path}.{k}" if path else k)]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [c for i, (a, b) in enumerate(zip(old, new, strict=True)) for c in _changed(a, b, f"{path}[{i}]")]
    return [] if old == new else [path]


def safety_changes(golden_plan: str, plan: str) -> list[str]:
    """`<urn> <path>` for each changed, added or removed value under a safety key of plan.json's resources."""
    def by_urn(text: str) -> dict[str, Any]:
        return {r["urn"]: r for r in json.loads(text)["resources"]}

    old, new = by_urn(golden_plan), by_urn(plan)
    return [f"{urn} {path}" for urn in sorted(old.keys() | new.keys())
            for path in _changed(old.get(urn), new.get(urn))
            if SAFETY_KEYS.intersection(path.replace("[", ".").split("."))]


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stack", available_stacks())
def test_plan_matches_golden(stack: str, tmp_path: Path) -> None:
    plan, _ = run_plan(stack)
    write_golden(plan, tmp_path)
    want, got = _files(GOLDEN / stack), _files(tmp_path)
    if got == want:
        return
    safety = safety_changes(want["plan.json"], got["plan.json"])
    review = ("safety fields changed: check each against tests/test_promises.py and README.md/docs/ before "
              "`make golden`:\n  " + "\n  ".join(safety)) if safety else "no safety field changed"
    added, removed = sorted(got.keys() - want.keys()), sorted(want.keys() - got.keys())
    diffs = "".join(line for name in sorted(got.keys() & want.keys()) if got[name] != want[name]
                    for line in difflib.unified_diff(want[name].splitlines(True), got[name].splitlines(True),
                                                     f"golden/{stack}/{name}", f"plan/{name}", n=2))
    pytest.fail(f"the {stack} plan differs from tests/golden/{stack}: {review}\nfiles added: {added}; "
                f"removed: {removed}\n(if intended: `make golden`, review `git diff tests/golden`)\n{diffs[:4000]}")


def test_safety_changes_name_the_resource_and_path() -> None:
    golden = (GOLDEN / "prod" / "plan.json").read_text()
    plan = json.loads(golden)
    pool = next(r for r in plan["resources"] if r["type"] == "kubernetes:karpenter.sh/v1:NodePool")
    pool["inputs"]["spec"]["disruption"]["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
    pool["inputs"]["metadata"]["labels"] = {"team": "ml"}
    db = next(r for r in plan["resources"] if r["type"] == "aws:rds/instance:Instance")
    db["protect"] = False
    assert safety_changes(golden, json.dumps(plan)) == sorted([
        f"{pool['urn']} inputs.spec.disruption.consolidationPolicy", f"{db['urn']} protect"])


def test_plans_are_deterministic() -> None:
    # Twelve runs alternate stacks in one process: the same bytes each time (no flaky event loops,
    # no random IDs, no ordering drift).
    seen: dict[str, set[str]] = {"dev": set(), "prod": set()}
    for i in range(12):
        stack = "dev" if i % 2 else "prod"
        plan, _ = run_plan(stack)
        seen[stack].add(plan.to_json())
    assert all(len(v) == 1 for v in seen.values())
