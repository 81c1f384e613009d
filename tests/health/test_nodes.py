"""slurm/agent/health/nodes.py on both JSON shapes: the real Slurm 22.05.8 `sinfo --json` captures (openapi/v0.0.38)
and data/nodes-v0.0.44.json, written (not captured) to schema `v0.0.44_openapi_nodes_resp` / `v0.0.44_node` of
the OpenAPI description slurmrestd 25.11 generates (the `slurmrestd_openapi` fixture, tests/slurm_openapi.py) and
validated against it here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurm.agent.health.nodes import SlurmNode, parse_nodes
from tests.conftest import require_module

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def test_v0044_fixture_follows_the_schema(slurmrestd_openapi: dict[str, Any]) -> None:
    oas30 = require_module("openapi_schema_validator", "the dev extra").OAS30Validator
    doc = load("nodes-v0.0.44.json")
    components = slurmrestd_openapi["components"]
    validator = oas30({"$ref": "#/components/schemas/v0.0.44_openapi_nodes_resp", "components": components})
    assert list(validator.iter_errors(doc)) == []
    # The schema allows extra keys; a fixture must not invent any.
    fields = set(components["schemas"]["v0.0.44_node"]["properties"])
    assert all(set(node) <= fields for node in doc["nodes"])
    broken = json.loads(json.dumps(doc))
    broken["nodes"][0]["state"] = "idle"  # the 22.05 shape is not a v0.0.44 node
    assert list(validator.iter_errors(broken)) != []


def test_v0044_nodes() -> None:
    drained, draining, person = parse_nodes(load("nodes-v0.0.44.json"))
    assert drained == SlurmNode("gpu-h100-0", frozenset({"IDLE", "DRAIN"}), 0,
                                "slurm-eks: gpu-count: nvidia-smi sees 7 GPUs, GRES says 8", "slurm", 1796194697,
                                ("gpu-h100", "all"), ("gpu-h100", "p5.48xlarge"))
    assert drained.drained and not drained.draining and drained.check and drained.check.check == "gpu-count"
    assert drained.partition == "gpu-h100"
    assert draining.draining and not draining.drained and draining.alloc_cpus == 96
    assert person.drained and person.check is None and person.reason_user == "alice"


def test_2205_captures() -> None:
    (drained,) = parse_nodes(load("sinfo-drained-22.05.json"))
    assert drained.states == {"IDLE", "DRAIN"} and drained.drained and drained.reason_time == 1796194697
    assert drained.partitions == ("cpu",) and drained.features == () and drained.check
    (draining,) = parse_nodes(load("sinfo-draining-22.05.json"))
    assert draining.states == {"MIXED", "DRAIN"} and draining.draining and not draining.drained
    assert draining.check and draining.check.check == "xid"
    (person,) = parse_nodes(load("sinfo-person-drained-22.05.json"))
    assert person.drained and person.check is None and person.reason == "fan noisy, checking"


@pytest.mark.parametrize(("states", "alloc", "drained", "draining"), [
    ({"IDLE"}, 0, False, False),
    ({"IDLE", "DRAIN"}, 0, True, False),
    ({"ALLOCATED", "DRAIN"}, 8, False, True),
    ({"MIXED", "DRAIN"}, 1, False, True),
    ({"COMPLETING", "IDLE", "DRAIN"}, 0, False, True),  # epilog still running
    ({"IDLE", "DRAIN"}, 4, False, True),  # CPUs still allocated whatever the state words say
    ({"IDLE", "DRAIN"}, 1, False, True),
    ({"DOWN", "DRAIN"}, 0, True, False),
])
def test_drained_and_draining(states: set[str], alloc: int, drained: bool, draining: bool) -> None:
    node = SlurmNode("n", frozenset(states), alloc)
    assert (node.drained, node.draining) == (drained, draining)


def test_v0038_strings_and_v0044_unset_time() -> None:
    (old,) = parse_nodes({"nodes": [{"name": "a", "state": "idle", "state_flags": ["DRAIN"], "features": "x, y",
                                     "partitions": ["p"], "reason_changed_at": 0}]})
    assert old.features == ("x", "y") and old.reason_time is None
    (new,) = parse_nodes({"nodes": [{"name": "b", "state": ["IDLE"], "reason_changed_at":
                                     {"set": False, "infinite": False, "number": 0}}]})
    assert new.reason_time is None and new.partition == ""
