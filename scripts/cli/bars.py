"""Horizontal bars for the terminal: how full a device's memory is (advise), what each partition and pool costs at
most (cost). Eighth-cell blocks, so a bar of 30 cells shows 240 steps; plain characters, readable in any log."""

from __future__ import annotations

EIGHTHS = " ▏▎▍▌▋▊▉"
FULL = "█"


def bar(value: float, full: float, width: int = 30) -> str:
    """`value` of `full` as `width` cells: filled blocks, then spaces (a value past `full` fills the bar)."""
    if full <= 0 or value <= 0:
        return " " * width
    eighths = round(min(value / full, 1.0) * width * 8)
    whole, part = divmod(eighths, 8)
    text = FULL * whole + (EIGHTHS[part] if part else "")
    return text.ljust(width)


def memory_bar(used_gib: float, capacity_gib: float, width: int = 30) -> str:
    """`[████████▌      ] 62.1 of 80 GiB (78%)`, or with `over` when it does not fit."""
    share = used_gib / capacity_gib if capacity_gib else 0.0
    over = " over" if used_gib > capacity_gib else ""
    return f"[{bar(used_gib, capacity_gib, width)}] {used_gib:.1f} of {capacity_gib:g} GiB ({share:.0%}{over})"
