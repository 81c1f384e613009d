"""The estimate in words: dollars, totals, its gaps (findings: what has no price), footnotes, JSON, and the cost
change between two plans (the preview workflow's PR comment, through `slurm-eks diff`). The table itself is
scripts/cli/cost.py's."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from components.findings import Finding
from scripts.cost.estimate import Estimate, Line, estimate
from scripts.cost.item_queries import refreshable
from scripts.cost.price_table import REFRESH_HINT, PriceTable
from scripts.offline.plan_model import Plan


def dollars(value: float | None) -> str:
    return "no price" if value is None else f"${value:,.2f}"


def signed(value: float) -> str:
    return f"{'-' if value < -0.005 else '+'}${abs(value):,.2f}"


def total(e: Estimate, attr: str) -> str:
    """A total, marked as a lower bound ("at least") when some line has no price."""
    return ("at least " if e.missing else "") + dollars(e.total(attr))


def _fix(missing: str, prices: PriceTable) -> str:
    if refreshable(missing):
        return f"{REFRESH_HINT}, or add a sourced price to {prices.path.name}"
    return f"add a sourced price to {prices.path.name} (`slurm-eks cost --refresh` does not fetch this item)"


def gaps(e: Estimate, prices: PriceTable) -> list[Finding]:
    """What the totals leave out: a plan that predates the node groups' output, and one warning per line and
    missing price (the totals are then lower bounds), sorted by what has no price."""
    found = []
    if not e.has_node_groups:
        found.append(Finding(rule="no-node-groups", severity="warning",
                             message="this plan has no `nodeGroups` output (it predates the cost estimate): "
                                     "partitions and pools not priced",
                             fix="plan it again with this revision (`slurm-eks plan`)"))
    unpriced = [Finding(rule="no-price", severity="warning", resource=f"{line.group} {line.name}",
                        message=f"no price: {m}", fix=_fix(m, prices))
                for line in e.lines for m in line.missing]
    return found + sorted(unpriced, key=lambda f: (f.message, f.resource))  # by what has no price


def footnotes(e: Estimate, prices: PriceTable) -> list[str]:
    """What is not counted by design, and the price sources (the gaps are `gaps`)."""
    out = [f"not counted: {', '.join(e.not_counted)}"]
    sources = sorted({s for line in e.lines for s in line.sources})
    out += [f"source {s}: {prices.source(s)}" for s in sources]
    return out


def as_json(e: Estimate) -> dict[str, Any]:
    return {"region": e.region, "lines": [asdict(line) for line in e.lines],
            "total": {"idle": e.total("idle"), "max": e.total("max")}, "missing": e.missing,
            "notCounted": e.not_counted}


def _key(line: Line) -> tuple[str, str]:
    return line.group, line.name


def delta_summary(old: Estimate, new: Estimate) -> str:
    """"+$98.32/h at max, +$0.00/h idle"."""
    return (f"{signed(new.total('max') - old.total('max'))}/h at max, "
            f"{signed(new.total('idle') - old.total('idle'))}/h idle")


def delta_markdown(old: Estimate, new: Estimate) -> str:
    """The cost section of the PR comment: the change in both totals and each line that moved."""
    lines = ["#### Cost change", "", f"**{delta_summary(old, new)}** (list prices, {new.region}; "
             f"now {dollars(new.total('max'))}/h at max, {dollars(new.total('idle'))}/h idle)"]
    before, after = {_key(x): x for x in old.lines}, {_key(x): x for x in new.lines}
    moved = [k for k in sorted(before.keys() | after.keys())
             if k not in before or k not in after or _figures(before[k]) != _figures(after[k])]
    if moved:
        lines += ["", "| group | name | idle $/h | at max $/h |", "| --- | --- | --- | --- |"]
        for k in moved:
            o, n = before.get(k), after.get(k)
            lines.append(f"| {k[0]} | {k[1]} | {_change(o, n, 'idle')} | {_change(o, n, 'max')} |")
    if not old.has_node_groups:
        lines += ["", "The base plan predates the `nodeGroups` output: its partitions count as $0."]
    missing = sorted(set(new.missing) | set(old.missing))
    if missing:
        lines += ["", f"Not in the totals (no price): {', '.join(missing)}."]
    return "\n".join(lines) + "\n"


def _figures(line: Line) -> tuple[float | None, float | None, str]:
    return line.idle, line.max, line.what


def _change(old: Line | None, new: Line | None, attr: str) -> str:
    o = getattr(old, attr) if old else 0.0
    n = getattr(new, attr) if new else 0.0
    if o is None or n is None:
        return "no price"
    return f"{signed(n - o)} ({dollars(n)})"


def plan_cost_change_json(before: Plan, after: Plan, prices: PriceTable) -> dict[str, object] | None:
    """`diff --format json`'s `cost`: the change of both totals at the same prices; None where plan_cost_change
    prints nothing or nothing can be priced (a plan without the `region` output)."""
    if not ("region" in before.outputs and "region" in after.outputs):
        return None
    old, new = estimate(before, prices), estimate(after, prices)
    return {"region": new.region, "usd_per_hour_max": round(new.total("max") - old.total("max"), 4),
            "usd_per_hour_idle": round(new.total("idle") - old.total("idle"), 4)}


def plan_cost_change(before: Plan, after: Plan, prices: PriceTable, markdown: bool, diff_empty: bool = False
                     ) -> str:
    """The cost part of `slurm-eks diff`, both plans priced with the same table so that it shows what the change
    does, not how prices moved. Nothing when nothing changed; a plan without the `region` output (not one of ours)
    is not priced."""
    if diff_empty:
        return ""
    if not ("region" in before.outputs and "region" in after.outputs):
        return "" if markdown else "cost: not estimated (a plan has no `region` output)\n"
    old, new = estimate(before, prices), estimate(after, prices)
    return "\n" + delta_markdown(old, new) if markdown else f"cost: {delta_summary(old, new)}\n"
