"""Values as sacctmgr writes them, and as slurmdbd stores them, so that the desired state and the state read
back compare equal once applied.

Sources, SchedMD/slurm at tag slurm-25-11-6-1 (22.05.8, the local test cluster, behaves the same):
- text: src/sacctmgr/common.c `strip_quotes` (called with make_lower for Description, Organization and
  Parent) lower-cases it, turns quotes into backquotes and trims spaces.
- times: src/common/parse_time.c `time_str2mins` (min, min:sec, hr:min:sec, days-hr, days-hr:min,
  days-hr:min:sec; seconds round up to a minute; -1, INFINITE and UNLIMITED mean no limit); sacctmgr
  prints them as `[days-]hh:mm:ss`.
- TRES: `name=count` pairs joined by commas; src/common/slurmdb_defs.c
  `slurmdb_make_tres_string_from_simple` prints mem, gres/gpumem and burst buffers in MB with a unit
  (`mem=32G`), and `NONE` for an infinite count. doc/man/man1/sacctmgr.1 "TRES information": `name=-1`
  removes one TRES's limit and leaves the others.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Appended to the Description of every QoS and account the reconcile manages: how it recognises what it
# created (docs/accounts.md "What it owns").
MARKER = "(managed by slurm-eks)"
CLEAR = "-1"  # "To clear an existing value, set a new value of -1" (sacctmgr(1))

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}
_UNLIMITED = ("-1", "INFINITE", "UNLIMITED")


def stored_text(text: str) -> str:
    """`text` as slurmdbd keeps it (strip_quotes with make_lower)."""
    return text.strip().lower().replace('"', "`").replace("'", "`")


def minutes(text: str) -> int | None:
    """A Slurm time in whole minutes (rounded up, as time_str2mins); None for no limit or an empty field."""
    if not text or text.upper() in _UNLIMITED:
        return None
    match = _TIME.match(text)
    if match is None:
        raise ValueError(f"not a Slurm time: {text!r}")
    days, first, second, third = (int(g) if g else 0 for g in match.groups())
    if match.group(1):  # days-hr[:min[:sec]]
        seconds = ((days * 24 + first) * 60 + second) * 60 + third
    elif match.group(4):  # hr:min:sec
        seconds = (first * 60 + second) * 60 + third
    else:  # min[:sec]
        seconds = first * 60 + second
    return -(-seconds // 60)


def show_minutes(value: int | None) -> str:
    """Minutes as sacctmgr prints a time limit: [days-]hh:mm:00."""
    if value is None:
        return "none"
    days, rest = divmod(value, 24 * 60)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def tres(text: str) -> dict[str, int]:
    """`cpu=8,gres/gpu=2,mem=32G` -> {"cpu": 8, "gres/gpu": 2, "mem": 32768} (mem in MiB)."""
    found: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        name, _, count = item.partition("=")
        if count.upper() == "NONE":
            continue
        unit = count[-1:].upper()
        found[name] = int(float(count[:-1]) * _UNITS[unit]) if unit in _UNITS else int(count)
    return found


def show_tres(value: Mapping[str, int]) -> str:
    """The canonical text of TRES counts: sorted by name, `none` when there are none."""
    return ",".join(f"{name}={count}" for name, count in sorted(value.items())) or "none"


def tres_assignment(old: Mapping[str, int], new: Mapping[str, int]) -> str:
    """What to write after `GrpTRES=` to go from `old` to `new`: each new count, and -1 for each TRES that
    no longer has a limit (writing only the new ones would keep the others)."""
    cleared = {name: CLEAR for name in old if name not in new}
    return ",".join(f"{name}={count}" for name, count in sorted({**cleared, **new}.items()))
