"""Every offline `slurm-eks` command in the README and docs/ runs as written (exit 0).

Commands are taken from the ```bash blocks, in order, each block in its own scratch directory (paths under
/tmp/ are moved into it). What needs more than this machine is left to the tests that have it: AWS
(`preflight`, `pulumi`), a Slurm cluster (`job submit|status|logs|cancel`, `local up`: the integration
tests run them for real), `make` (CI runs `make plan` and `make test`), and lines with `<placeholders>`.
In a line like `git stash && slurm-eks plan ... && git stash pop`, the slurm-eks part runs; the
reader's git is not touched.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OFFLINE = ("validate", "check", "plan", "diff", "policy", "job render", "job deepspeed-config", "advise")


def bash_blocks(page: Path) -> list[list[str]]:
    return [block.splitlines() for block in re.findall(r"^```bash\n(.*?)^```", page.read_text(), re.M | re.S)]


def runnable(line: str) -> list[str]:
    """The offline slurm-eks commands of one line (a line may chain several with && or ;)."""
    code = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
    if "<" in code.replace("< ", ""):  # a placeholder such as <id>
        return []
    parts = [p.strip() for p in re.split(r"&&|;", code)]
    return [p for p in parts if p.startswith("slurm-eks ")
            and any(p.removeprefix("slurm-eks ").startswith(sub + " ") for sub in OFFLINE)]


def commands() -> list[tuple[str, int, list[str]]]:
    found = []
    for page in PAGES:
        for i, block in enumerate(bash_blocks(page)):
            lines = [c for line in block for c in runnable(line)]
            if lines:
                found.append((page.relative_to(REPO).as_posix(), i, lines))
    return found


def test_the_extraction_finds_the_documented_commands() -> None:
    everything = " | ".join(c for _, _, block in commands() for c in block)
    for expected in ("slurm-eks validate --stack prod", "slurm-eks check --stack prod", "slurm-eks diff",
                     "slurm-eks plan --stack prod --out /tmp/before", "slurm-eks job render --stack prod",
                     "slurm-eks advise --stack prod"):
        assert expected in everything


@pytest.mark.parametrize(("page", "index", "block"), commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_documented_commands_run_as_written(page: str, index: int, block: list[str], tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NO_COLOR": "1", "COLUMNS": "200"}
    for command in block:
        moved = command.replace("/tmp/", f"{tmp_path}/")
        result = subprocess.run(["bash", "-c", f"set -o pipefail; {moved}"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{page}: `{command}` exited {result.returncode}:\n{result.stderr[-2000:]}"
