"""The one error type the local cluster raises: a message a person can act on, never a traceback."""

from __future__ import annotations

from pathlib import Path


class LocalSlurmError(RuntimeError):
    """Bringing the local Slurm up or down failed; the message names the log file to read."""


def tail(path: Path, lines: int = 8) -> str:
    """The last lines of a log file, indented for an error message (empty if it does not exist)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    last = text.rstrip().splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in last)


def daemon_failed(name: str, what: str, log: Path, console: Path) -> LocalSlurmError:
    """An error for a daemon that did not come up, quoting the end of its log and of its console output."""
    detail = "".join(f"\n  last lines of {path}:\n{excerpt}" for path in (log, console) if (excerpt := tail(path)))
    return LocalSlurmError(f"{name} {what}; see {log}{detail or ' (nothing logged yet)'}")
