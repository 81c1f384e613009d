"""`make crds`: download the upstream CRD schemas the tests and `slurm-eks validate --crds` read, from the commits
pinned in tools/crds.json, into build/crds/<project>/<file>. Each file must match its SHA-256 or it is refused
(not written). Standard library only, so it runs before any virtual environment exists.

    python3 tools/fetch_crds.py [--manifest tools/crds.json] [--dest build/crds]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MANIFEST = REPO / "tools" / "crds.json"
DEST = REPO / "build" / "crds"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(url: str, timeout: float = 60) -> bytes:
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"not an http(s) URL: {url}")
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def fetch(manifest: Path = MANIFEST, dest: Path = DEST) -> list[str]:
    """Fetch every file of the manifest that dest lacks or holds with another hash; return the problems."""
    problems = []
    for entry in json.loads(manifest.read_text())["files"]:
        target = dest / entry["path"]
        if target.is_file() and sha256(target.read_bytes()) == entry["sha256"]:
            continue  # already verified: a rerun needs no network
        try:
            data = download(entry["url"])
        except (OSError, ValueError) as error:
            problems.append(f"{entry['path']}: {entry['url']}: {error}")
            continue
        if (got := sha256(data)) != entry["sha256"]:
            problems.append(f"{entry['path']}: refused, sha256 {got} is not the pinned {entry['sha256']} "
                            f"({entry['url']})")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # Written beside and renamed, so an interrupted run never leaves a partial file that looks fetched.
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        partial.replace(target)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--dest", type=Path, default=DEST)
    args = parser.parse_args(argv)
    problems = fetch(args.manifest, args.dest)
    for problem in problems:
        print(problem, file=sys.stderr)
    count = len(json.loads(args.manifest.read_text())["files"])
    print(f"{args.dest}: {count - len(problems)}/{count} CRD files verified")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
