"""The README, CONTRIBUTING.md and docs/ hold together: every relative link (and #anchor) resolves, and every
page in docs/ (and CONTRIBUTING.md) is linked from the README."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped except - and _, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", markdown), re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


def broken_links(page: Path) -> list[str]:
    problems = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            problems.append(f"{page.name}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved.read_text()):
            problems.append(f"{page.name}: {target} (no heading #{anchor} in {resolved.name})")
    return problems


def pages() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_relative_link_resolves() -> None:
    assert len(pages()) > 3
    assert [p for page in pages() for p in broken_links(page)] == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(REPO / t.partition("#")[0]).resolve() for t in LINK.findall(prose((REPO / "README.md").read_text()))}
    assert [p.name for p in pages()[1:] if p.resolve() not in linked] == []


def test_the_link_check_fires(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Deploying for real\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#deploying-for-real) [gone](missing.md) [anchor](other.md#nowhere) "
                    "[web](https://example.com) `[code](missing.md)`\n```\n[fenced](missing.md)\n```\n")
    assert broken_links(page) == ["page.md: missing.md (no such file)",
                                  "page.md: other.md#nowhere (no heading #nowhere in other.md)"]
