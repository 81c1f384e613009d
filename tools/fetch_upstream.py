"""`make upstream`: put the upstream files the program reads (components/upstream.py PINNED: the MPI Operator's
release manifest) into build/upstream/<project>/<file>, each SHA-256 checked: copied from the mirror
(../shared/upstream) when it holds the file, else downloaded from its release URL. Standard library only, so it
runs before any virtual environment exists.

    python3 tools/fetch_upstream.py [--cache build/upstream] [--mirror ../shared/upstream] [--offline]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run by path: tools/ is sys.path[0], not the repository
    sys.path.insert(0, str(REPO))

from components.upstream import CACHE, PINNED, fill  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--mirror", type=Path, default=REPO.parent / "shared" / "upstream",
                        help="a directory laid out as the cache, read before the network (skipped when absent)")
    parser.add_argument("--offline", action="store_true", help="never download: the cache or the mirror only")
    args = parser.parse_args(argv)
    mirror = args.mirror if args.mirror.is_dir() else None
    problems = fill(PINNED, args.cache, mirror, download=not args.offline)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{args.cache}: {len(PINNED) - len(problems)}/{len(PINNED)} upstream files verified")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
