"""What a rule may know beyond the config itself: which stack it is, the stacks directory it sits in (its
siblings), the policy pack's config for it (policy/config/<stack>.json, read as a file: components/ never imports
the pack) and today's date. `load_stack`, the offline plan and the program pass one; without it (a config on its
own) the rules that need it check nothing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

PACK_CONFIG_DIR = Path(__file__).resolve().parents[2] / "policy" / "config"


@dataclass(frozen=True)
class StackContext:
    name: str | None = None  # None: a config on its own, no stack
    stacks_dir: Path | None = None  # None: its siblings are unknown (the program under `pulumi up`)
    pack_config: Path | None = None  # None: PACK_CONFIG_DIR/<name>.json
    today: date | None = None  # None: today's date in UTC; tests set it

    @property
    def date(self) -> date:
        return self.today or datetime.now(UTC).date()

    @property
    def pack_config_file(self) -> Path | None:
        """The pack config that holds this stack's waivers, or None without a stack."""
        if self.pack_config is not None:
            return self.pack_config
        return PACK_CONFIG_DIR / f"{self.name}.json" if self.name else None


NO_STACK = StackContext()
