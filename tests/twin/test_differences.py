"""docs/architecture.md's list of where the twin differs is the one scripts/twin/differences.py generates from what
the twin runs, and its Slurm version is the one the twin builds."""

from __future__ import annotations

from scripts.twin import differences
from scripts.twin.standin_table import TABLE
from tests.conftest import require_shared


def test_the_doc_holds_the_generated_list() -> None:
    text = differences.DOC.read_text()
    assert differences.rewritten(text) == text, (
        "docs/architecture.md's twin differences are stale: run `python -m scripts.twin.differences`")


def test_the_list_changes_with_the_table() -> None:
    """A stand-in added to the table (or removed) changes the generated block: the doc check above then fails."""
    rendered = differences.render()
    assert all(entry.name in rendered and entry.real in rendered for entry in TABLE)
    shortened = differences.TABLE[:-1]
    try:
        differences.TABLE = shortened  # type: ignore[misc]
        assert differences.render() != rendered
    finally:
        differences.TABLE = TABLE  # type: ignore[misc]


def test_the_twins_slurm_is_the_tarballs() -> None:
    tarballs = sorted(p.name for p in require_shared("upstream/slurm").glob("slurm-25.11*.tar.gz"))
    assert tarballs == [f"slurm-{differences.TWIN_SLURM}.tar.gz"]
