"""Property: any mutation of a valid config either stays valid or raises ConfigError, never anything else."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config.problems import ConfigError
from components.config.validation import parse_cluster_config
from tests.config.helpers import raw_config

BASES = {"dev": raw_config("dev"), "prod": raw_config("prod")}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.text(max_size=12),
    st.sampled_from(["0.0.0.0/0", "1.30", "p5.48xlarge", "PERSISTENT_2", "spot", "s3://b/p", "/data", "us-west-2a"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=6)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    import copy

    raw = copy.deepcopy(BASES[draw(st.sampled_from(sorted(BASES)))])
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(raw)
        if not paths:
            break
        *parents, last = draw(st.sampled_from(paths))
        node = raw
        for p in parents:
            node = node[p]
        action = draw(st.sampled_from(["replace", "delete", "add"]))
        if action == "replace":
            node[last] = draw(values)
        elif action == "delete":
            del node[last]
        elif isinstance(node, dict):
            node[draw(st.text(max_size=10))] = draw(values)
    return raw


def _segments(path: str) -> list[str | int]:
    """`partitions.gpu.instanceTypes[0]` -> ["partitions", "gpu", "instanceTypes", 0]; `tags["a.b"]` ->
    ["tags", "a.b"] (components.config.validation.config_path quotes keys that are not plain)."""
    parts = re.findall(r'\[\d+\]|\["(?:[^"\\]|\\.)*"\]|[^.\[\]]+', path)
    return [int(p[1:-1]) if re.fullmatch(r"\[\d+\]", p) else json.loads(p[1:-1]) if p.startswith("[") else p
            for p in parts]


def points_into(raw: dict[str, Any], path: str) -> bool:
    """The problem's path names a value of this config, or a place under an existing mapping where the fix
    adds one (`network.deployer` when `network` has no deployer, or no network section at all)."""
    node: Any = raw
    for segment in _segments(path):
        present = (segment in node) if isinstance(node, dict) else (
            isinstance(node, list) and isinstance(segment, int) and segment < len(node))
        if not present:
            return isinstance(node, dict) and isinstance(segment, str)
        node = node[segment]
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutations_yield_config_or_config_error(raw: dict[str, Any]) -> None:
    # Every problem, error or warning, must point at the place in the user's file it is about.
    try:
        config, warnings = parse_cluster_config(raw, "mutated.yaml")
    except ConfigError as exc:
        unplaced = [p for p in exc.findings if not (p.path and points_into(raw, p.path) and p.message and p.fix)]
        assert not unplaced, unplaced
        return
    assert [w for w in warnings if not (w.path and points_into(raw, w.path))] == []
    # A valid config survives a round trip through its YAML form unchanged.
    again, _ = parse_cluster_config(config.model_dump(by_alias=True, exclude_none=True))
    assert again == config
