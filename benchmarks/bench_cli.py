"""How long `slurm-eks` commands take from the shell, as a ratio to the interpreter's own start-up (`make bench`).

Each command runs as a whole process, `--repeats` times, interleaved with `python -c pass` (A B A B ...), so the
ratio of each pair holds when the machine's speed drifts; one JSON line per command: seconds (min / median / max)
and the ratio to the bare interpreter per pair (min / median / max). The plan-reading commands run after one
warm-up, so they read the plan cache (scripts/offline/plan_cache.py), as a second command in a row does.

Targets (issue: "`--help` and `validate` start in under 0.5 s"): compare the `--help` and `validate` medians with
0.5 s on an idle machine; the ratio says how much of it the interpreter itself costs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "slurm-eks"
COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "validate": ["validate", "--stack", "dev"],
    "job render": ["job", "render", "--stack", "dev", "--partition", "gpu", "--", "jobs/train.py"],
    "check (cached plan)": ["check", "--stack", "dev"],
    "cost (cached plan)": ["cost", "--stack", "dev"],
}


def seconds(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def spread(values: list[float]) -> dict[str, float]:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    bare = [sys.executable, "-c", "pass"]
    for name, command in COMMANDS.items():
        argv = [str(CLI), *command]
        seconds(argv)  # warm-up: the page cache, and the plan cache for the commands that plan
        pairs = [(seconds(argv), seconds(bare)) for _ in range(args.repeats)]
        print(json.dumps({"command": name, "seconds": spread([a for a, _ in pairs]),
                          "interpreter_seconds": spread([b for _, b in pairs]),
                          "ratio_to_interpreter": spread([a / b for a, b in pairs])}), flush=True)


if __name__ == "__main__":
    main()
