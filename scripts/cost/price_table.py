"""The price table (scripts/cost/prices.json): USD list prices by region, each with the source it came from.

A lookup answers a Price or None; the estimate turns None into a "no price" line that names what is missing and
how to get it (`slurm-eks cost --refresh`), so an unpriced item is never silently counted as free.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TABLE_PATH = Path(__file__).with_name("prices.json")
REFRESH_HINT = "run `slurm-eks cost --refresh` with AWS credentials to fetch it from the Price List API"


@dataclass(frozen=True)
class Price:
    usd: float
    source: str  # a key of the table's "sources"


class PriceTable:
    def __init__(self, data: dict[str, Any], path: Path = TABLE_PATH) -> None:
        self.data = data
        self.path = path

    @classmethod
    def load(cls, path: Path = TABLE_PATH) -> PriceTable:
        return cls(json.loads(path.read_text()), path)

    def save(self) -> None:
        """Whole or not at all: a refresh interrupted mid-write leaves the previous table."""
        handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w") as stream:
                stream.write(json.dumps(self.data, indent=2) + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _region(self, region: str) -> dict[str, Any]:
        return self.data["regions"].get(region, {})

    @staticmethod
    def _price(entry: dict[str, Any] | None) -> Price | None:
        return Price(float(entry["usd"]), entry["source"]) if entry else None

    def instance_hour(self, region: str, instance_type: str) -> Price | None:
        """Linux on-demand $/hour of one instance."""
        return self._price(self._region(region).get("instances", {}).get(instance_type))

    def item(self, region: str, key: str) -> Price | None:
        """A regional item ("natGatewayHour", "nlbHour", "fsxGbMonth:PERSISTENT_2:250", ...), else a global one
        ("eksClusterHour")."""
        return self._price(self._region(region).get(key) or self.data["global"].get(key))

    def source(self, key: str) -> str:
        src = self.data["sources"][key]
        return f"{src['where']}, {src['date']}"

    def set_instances(self, region: str, prices: dict[str, float], source: str, where: str, date: str) -> None:
        """Replace `region`'s instance prices with `prices` from `source` (a refresh)."""
        self.data["sources"][source] = {"where": where, "date": date}
        regions = self.data["regions"]
        regions.setdefault(region, {})["instances"] = {
            t: {"usd": p, "source": source} for t, p in sorted(prices.items())}

    def set_items(self, region: str, prices: dict[str, float], source: str, where: str, date: str) -> None:
        """Set `region`'s fixed items in `prices` (a refresh); items the refresh did not price keep their entry."""
        self.data["sources"][source] = {"where": where, "date": date}
        items = self.data["regions"].setdefault(region, {})
        items.update({key: {"usd": usd, "source": source} for key, usd in sorted(prices.items())})
