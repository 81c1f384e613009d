"""Waivers of a Slurm security advisory for one stack, with an expiry: while a stack runs a release an advisory
affects, an urgent unrelated change can still go out. They are granted like the pack's other waivers, in that stack's
pack config (policy/config/<stack>.json, which CODEOWNERS guards), so whoever edits the stack file cannot grant one:

    {"slurm-patched": {"advisoryWaivers": [{"advisory": "CVE-2026-65107", "reason": "...",
                                            "approvedBy": "security@example.com", "expires": "2026-10-31"}]}}

The config rule `slurm-advisories` and the pack's `slurm-patched` read them through this module alone: an unexpired
waiver lowers the advisory to a warning (the pack lets it pass), an expired one is an error, and one that matches no
advisory affecting the stack's releases is stale (a warning). A waiver holds through its `expires` day (UTC)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from components.config.slurm_advisories import Advisory

POLICY = "slurm-patched"  # the pack's rule whose config holds them
PROPERTY = "advisoryWaivers"
FIELDS = {"advisory": "the advisory's id or one of its CVEs (components/config/slurm_advisories.py)",
          "reason": "why the stack cannot take the fixed release yet",
          "approvedBy": "who approved it (the pack's owners review policy/config/)",
          "expires": "the last day it holds, an ISO date (YYYY-MM-DD)"}
ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"
# pulumi-policy's PolicyConfigSchema property: `pulumi preview` validates the file against it, as offline does.
SCHEMA: Mapping[str, Any] = {
    "type": "array",
    "default": [],
    "description": "Advisories (components/config/slurm_advisories.py) this stack may run unpatched until a date.",
    "items": {"type": "object", "required": list(FIELDS), "additionalProperties": False,
              "properties": {key: {"type": "string", "minLength": 1, "description": text,
                                   **({"pattern": ISO_DATE} if key == "expires" else {})}
                             for key, text in FIELDS.items()}},
}
EXAMPLE = ('{"advisory": "CVE-2026-65107", "reason": "...", "approvedBy": "...", "expires": "YYYY-MM-DD"}')


class WaiverError(ValueError):
    """A waiver the pack's config states wrongly: where, the bad value, the fix."""


@dataclass(frozen=True)
class AdvisoryWaiver:
    advisory: str
    reason: str
    approved_by: str
    expires: date
    where: str  # "policy/config/prod.json slurm-patched.advisoryWaivers[0]"

    def matches(self, advisory: Advisory) -> bool:
        return self.advisory in (advisory.id, *advisory.cves)

    def expired(self, today: date) -> bool:
        return today > self.expires

    def describe(self) -> str:
        return (f"waiver {self.where} ({self.advisory}: {self.reason!r}, approved by {self.approved_by}, "
                f"expires {self.expires.isoformat()})")


def parse(raw: Any, where: str) -> list[AdvisoryWaiver]:
    """The waivers of `raw` (the property's value); WaiverError naming the first one stated wrongly."""
    if not isinstance(raw, list):
        raise WaiverError(f"{where}: {raw!r} is not a list of waivers; write [{EXAMPLE}]")
    return [_waiver(entry, f"{where}[{i}]") for i, entry in enumerate(raw)]


def _waiver(entry: Any, where: str) -> AdvisoryWaiver:
    if not isinstance(entry, Mapping):
        raise WaiverError(f"{where}: {entry!r} is not a waiver; write {EXAMPLE}")
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise WaiverError(f"{where}: unknown key {unknown[0]!r}; a waiver has {', '.join(FIELDS)}")
    for key, text in FIELDS.items():
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            raise WaiverError(f"{where}.{key}: {'missing' if value is None else repr(value)}; every waiver states "
                              f"{key}: {text}")
    expires = entry["expires"]
    try:
        day = date.fromisoformat(expires) if re.fullmatch(ISO_DATE, expires) else None
    except ValueError:
        day = None
    if day is None:
        raise WaiverError(f"{where}.expires: {expires!r} is not an ISO date; write the last day it holds, such as "
                          "\"2026-10-31\"")
    return AdvisoryWaiver(entry["advisory"], entry["reason"], entry["approvedBy"], day, where)


def from_settings(settings: Mapping[str, Any], where: str = POLICY) -> list[AdvisoryWaiver]:
    """The waivers among a rule's settings (pulumi-policy's `args.get_config()`)."""
    return parse(settings.get(PROPERTY, []), f"{where} {POLICY}.{PROPERTY}")


def read(path: Path | None) -> list[AdvisoryWaiver]:
    """The waivers in a pack config file; none when there is no file or it grants none."""
    if path is None or not path.exists():
        return []
    try:
        raw = json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError) as exc:
        raise WaiverError(f"{path}: not JSON ({exc}); fix it (`slurm-eks policy` names the problem)") from None
    entry = raw.get(POLICY) if isinstance(raw, Mapping) else None
    return from_settings(entry, str(path)) if isinstance(entry, Mapping) else []


@dataclass(frozen=True)
class Verdict:
    """One advisory a release carries, and the waiver that covers it, if any."""

    advisory: Advisory
    waiver: AdvisoryWaiver | None
    expired: bool = False

    @property
    def waived(self) -> bool:
        return self.waiver is not None and not self.expired

    def note(self) -> str:
        """What the waiver does to the finding, for its message ("" without one)."""
        if self.waiver is None:
            return ""
        if self.expired:
            return f"; its {self.waiver.describe()} has expired"
        return f"; waived by {self.waiver.describe()}"


def judge(advisories: Iterable[Advisory], waivers: Iterable[AdvisoryWaiver], today: date) -> list[Verdict]:
    """Each advisory with its waiver: an unexpired one first, else an expired one, else none."""
    found = []
    for advisory in advisories:
        covering = [w for w in waivers if w.matches(advisory)]
        live = [w for w in covering if not w.expired(today)]
        found.append(Verdict(advisory, live[0]) if live else
                     Verdict(advisory, covering[0], expired=True) if covering else Verdict(advisory, None))
    return found


def stale(waivers: Iterable[AdvisoryWaiver], advisories: Iterable[Advisory]) -> list[AdvisoryWaiver]:
    """The waivers that match none of `advisories` (those affecting the releases the stack runs)."""
    affecting = list(advisories)
    return [w for w in waivers if not any(w.matches(a) for a in affecting)]


RENEW = ("renew it: a later `expires` (and a fresh approvedBy) in the stack's policy/config/<stack>.json, "
         "reviewed by the pack's owners")
