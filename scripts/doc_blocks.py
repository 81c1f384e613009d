"""Blocks of the docs generated from code: the text between a start and an end marker, rewritten whole."""

from __future__ import annotations

from pathlib import Path


class StaleBlockError(ValueError):
    """A doc without the markers of its generated block."""


def rewritten(text: str, start: str, end: str, body: str, doc: Path) -> str:
    """`text` (the file `doc`) with the block between `start` and `end` replaced by `body`."""
    head, found, rest = text.partition(start)
    if not found or end not in rest:
        raise StaleBlockError(f"{doc}: no {start} ... {end} block to write into")
    return f"{head}{start}\n{body}\n{end}{rest.split(end, 1)[1]}"
