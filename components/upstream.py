"""Files the program reads from upstream releases, pinned by URL and SHA-256, never carried in the project.

Each lives in a cache, build/upstream/<path>, that `make upstream` (tools/fetch_upstream.py) fills: from a local
mirror with the same layout when there is one (../shared/upstream, which the tests use), else from its release
URL. Whatever the source, a file is used only when its SHA-256 is the pinned one, and written by rename, so an
interrupted copy never looks fetched. The offline plan reads the cache only; under `pulumi up` or `pulumi preview`
the program downloads a file the cache lacks. Standard library only: `make upstream` runs before any venv exists.
"""

from __future__ import annotations

import hashlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "build" / "upstream"
FIX = "run `make upstream` (it copies the file from ../shared/upstream when present, else downloads it)"


@dataclass(frozen=True)
class UpstreamFile:
    path: str  # under the cache and under a mirror: <project>/<file>
    url: str  # the file its release publishes
    version: str  # the release
    sha256: str


# kubeflow/mpi-operator ships no chart: its README at tag v0.8.0 (commit 101db144e019e1de65aaded07745e9d805c2852a)
# installs this file with `kubectl apply --server-side -f <url>`.
MPI_OPERATOR_VERSION = "v0.8.0"
MPI_OPERATOR = UpstreamFile(
    path=f"mpi-operator/mpi-operator-{MPI_OPERATOR_VERSION}.yaml",
    url=f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{MPI_OPERATOR_VERSION}/deploy/v2beta1/"
        "mpi-operator.yaml",
    version=MPI_OPERATOR_VERSION,
    sha256="b38def13a94abe60b2a4b3485239d77f64892b8fbd202e9e435a6031b7500a8f",
)
PINNED = (MPI_OPERATOR,)


class UpstreamError(Exception):
    """A pinned file that is not in the cache as pinned (missing, or other bytes), or could not be fetched."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_problem(file: UpstreamFile, cache: Path | None = None) -> str | None:
    """What is wrong with the cached copy of `file`, naming its path and the pinned digest (the fix is FIX), or
    None when it is there as pinned."""
    path = (cache or CACHE) / file.path
    if not path.is_file():
        return f"{path} is missing (the pinned {file.url}, sha256 {file.sha256})"
    if (got := sha256(path.read_bytes())) != file.sha256:
        return f"{path} has sha256 {got}, not the pinned {file.sha256} of {file.url}"
    return None


def read(file: UpstreamFile, cache: Path | None = None, download: bool = False, timeout: float = 60) -> bytes:
    """The pinned bytes of `file` from the cache; with `download`, fetched into the cache when it lacks them.
    Raises UpstreamError (never returns other bytes)."""
    cache = cache or CACHE
    path = cache / file.path
    if path.is_file() and sha256(data := path.read_bytes()) == file.sha256:
        return data
    if not download:
        raise UpstreamError(f"{cache_problem(file, cache)}: {FIX}")
    try:
        data = fetch_url(file.url, timeout)
    except (OSError, ValueError) as error:
        raise UpstreamError(f"{file.url}: {error}; {path} not written ({FIX} where the network allows)") from None
    store(file, data, cache)
    return data


def fetch_url(url: str, timeout: float = 60) -> bytes:
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"not an http(s) URL: {url}")
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


def store(file: UpstreamFile, data: bytes, cache: Path | None = None) -> Path:
    """Write `data` as the cached copy of `file` if it has the pinned digest, else raise UpstreamError."""
    path = (cache or CACHE) / file.path
    if (got := sha256(data)) != file.sha256:
        raise UpstreamError(f"{file.path}: refused, sha256 {got} is not the pinned {file.sha256} ({file.url}); "
                            f"{path} not written")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed: an interrupted write never leaves a partial file that looks fetched.
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.replace(path)
    return path


def fill(files: tuple[UpstreamFile, ...] = PINNED, cache: Path | None = None, mirror: Path | None = None,
         download: bool = True, timeout: float = 60) -> list[str]:
    """Put every file in the cache as pinned: kept when already there, else copied from `mirror/<path>`, else
    (with `download`) fetched from its URL. Returns the problems, one line per file not in place."""
    cache = cache or CACHE
    problems = []
    for file in files:
        if cache_problem(file, cache) is None:
            continue  # already verified: a rerun needs neither the mirror nor the network
        copy = mirror / file.path if mirror is not None else None
        if copy is not None and copy.is_file():
            try:
                store(file, copy.read_bytes(), cache)
                continue
            except UpstreamError as error:
                problems.append(f"{copy}: {error}")
                continue
        if not download:
            problems.append(f"{file.path}: not in {cache} nor in {mirror}, and downloads are off")
            continue
        try:
            read(file, cache, download=True, timeout=timeout)
        except UpstreamError as error:
            problems.append(str(error))
    return problems
