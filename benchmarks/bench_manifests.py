"""How fast the manifest validator checks a plan's manifests against the upstream CRDs (`make bench`).

Validates every manifest of the golden plans (tests/golden/<stack>/manifests/) `--repeats` times and prints
one JSON line: manifests, and milliseconds per manifest as min / median / max over the repeats. The CRDs
come from build/crds (`make crds`) or ../shared/crds, as in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.manifests.crd_schema import SchemaRegistry  # noqa: E402
from scripts.manifests.manifest_schema import validate_manifest  # noqa: E402


def crds() -> Path:
    fetched = ROOT / "build" / "crds"
    return fetched if fetched.is_dir() else Path(os.environ.get("SLURM_EKS_SHARED", ROOT.parent / "shared")) / "crds"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    registry = SchemaRegistry.from_crd_dirs([crds()])
    # Objects copied from upstream manifests are digests in the golden plans (tests/golden/upstream_stubs.py).
    docs = [doc for path in sorted((ROOT / "tests" / "golden").glob("*/manifests/*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc and "upstream" not in doc]  # fmt: skip
    per_manifest_ms = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for doc in docs:
            validate_manifest(doc, registry)
        per_manifest_ms.append((time.perf_counter() - start) * 1e3 / len(docs))
    print(json.dumps({"bench": "manifest_validation", "manifests": len(docs), "ms_per_manifest": {
        "min": round(min(per_manifest_ms), 3), "median": round(statistics.median(per_manifest_ms), 3),
        "max": round(max(per_manifest_ms), 3)}, "repeats": args.repeats}))


if __name__ == "__main__":
    main()
