"""slurmrestd's OpenAPI description of data_parser v0.0.44, generated from the Slurm 25.11 build the tests run
(`slurmrestd --generate-openapi-spec -s slurmctld,slurmdbd -d v0.0.44`: no daemon starts, only a slurm.conf is
read). Generated once into build/openapi/, keyed by the build's path, version and slurmrestd binary, and written
atomically, so parallel workers and later sessions share it. tests/conftest.py's `slurmrestd_openapi` fixture
calls it with the build's prefix (or skips / fails as `require_slurm()` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CACHE_DIR = Path(__file__).resolve().parent.parent / "build" / "openapi"
DATA_PARSER = "v0.0.44"
PLUGINS = "slurmctld,slurmdbd"
# A missing slurm.conf makes Slurm retry for 60 s; a generation that takes this long is broken.
TIMEOUT_S = 60


class SpecError(RuntimeError):
    """slurmrestd could not generate its description."""


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"`{' '.join(argv)}` did not run: {exc}") from exc
    if result.returncode != 0:
        raise SpecError(f"`{' '.join(argv)}` exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    return result


def _environment(prefix: Path, work: Path) -> dict[str, str]:
    """Only this build's plugins and a minimal slurm.conf: nothing of the caller's Slurm settings."""
    conf = work / "slurm.conf"
    conf.write_text("ClusterName=openapi\nSlurmctldHost=localhost\nAuthType=auth/slurm\n"
                    f"PluginDir={prefix / 'lib' / 'slurm'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    return {**env, "SLURM_CONF": str(conf)}


def cache_path(prefix: Path, cache_dir: Path = CACHE_DIR) -> Path:
    """Where the description of this build is cached: its version in the name, and a key of the build's path and
    slurmrestd binary, so a rebuilt or other Slurm never reads another's description."""
    slurmrestd = prefix / "sbin" / "slurmrestd"
    if not slurmrestd.is_file():
        raise SpecError(f"{slurmrestd} is missing: `make slurm` builds it")
    with tempfile.TemporaryDirectory(prefix="slurm-openapi-") as work:
        version = _run([str(slurmrestd), "-V"], _environment(prefix, Path(work))).stdout.split()
    if len(version) != 2 or version[0] != "slurm":
        raise SpecError(f"`{slurmrestd} -V` printed {' '.join(version)!r}, not `slurm <version>`")
    stat = slurmrestd.stat()
    key = hashlib.sha256(f"{prefix.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_dir / f"slurmrestd-{version[1]}-{DATA_PARSER}-{key}.json"


def generate(prefix: Path) -> str:
    """The description as slurmrestd prints it."""
    with tempfile.TemporaryDirectory(prefix="slurm-openapi-") as work:
        argv = [str(prefix / "sbin" / "slurmrestd"), "--generate-openapi-spec", "-s", PLUGINS, "-d", DATA_PARSER]
        text = _run(argv, _environment(prefix, Path(work))).stdout
    try:
        json.loads(text)
    except ValueError as exc:
        raise SpecError(f"slurmrestd --generate-openapi-spec printed no JSON ({exc}): {text[:200]!r}") from exc
    return text


def load(prefix: Path, cache_dir: Path = CACHE_DIR) -> dict[str, Any]:
    """The parsed description of the build at `prefix`, generated on first use."""
    path = cache_path(prefix, cache_dir)
    if not path.is_file():
        text = generate(prefix)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                out.write(text)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    spec: dict[str, Any] = json.loads(path.read_text())
    return spec
