"""The recorded DescribeInstanceTopology pages (data/README.md) and the layout they describe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slurm.agent.topology.instance_topology import InstanceTopology, read_pages

DATA = Path(__file__).parent / "data"
PAGES = (DATA / "describe-instance-topology-page-1.json", DATA / "describe-instance-topology-page-2.json")

SPINE_ODD, SPINE_EVEN = "nn-0a1b2c3d4e5f60701", "nn-0a1b2c3d4e5f60702"
MID_ODD, MID_EVEN_1, MID_EVEN_2 = "nn-1b2c3d4e5f6a70801", "nn-1b2c3d4e5f6a70802", "nn-1b2c3d4e5f6a70803"
LEAF_135, LEAF_7, LEAF_24, LEAF_68 = (f"nn-2c3d4e5f6a7b8090{k}" for k in range(1, 5))
UNCOVERED = "i-0a1b2c3d4e5f6a709"


def instance_id(k: int) -> str:
    return f"i-0a1b2c3d4e5f6a70{k}"


def pages() -> list[dict[str, Any]]:
    """The two pages, fresh copies (a test may edit its own)."""
    return [json.loads(page.read_text()) for page in PAGES]


def instances() -> tuple[InstanceTopology, ...]:
    return read_pages(pages())


def one_node_each(prefix: str = "tn") -> dict[str, list[str]]:
    """Instance k hosts Slurm node <prefix>k (k = 1..9)."""
    return {instance_id(k): [f"{prefix}{k}"] for k in range(1, 10)}
