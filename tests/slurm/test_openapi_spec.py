"""The `slurmrestd_openapi` fixture: slurmrestd's OpenAPI description generated from the Slurm 25.11 build
(tests/slurm_openapi.py), cached per build, and a clear skip (a failure under CI=true) without one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import conftest, slurm_openapi

FAKE = """#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
echo "$*" >> "$here/calls"
grep -qx "PluginDir=$here/lib/slurm" "$SLURM_CONF" || { echo "no PluginDir in $SLURM_CONF" >&2; exit 3; }
case "$1" in
  -V) echo "slurm 25.11.7" ;;
  *) cat "$here/spec.json" ;;
esac
"""


def fake_build(root: Path, spec: str = '{"openapi": "3.0.3"}') -> Path:
    """A prefix whose sbin/slurmrestd prints `spec` and counts its calls."""
    (root / "sbin").mkdir(parents=True)
    (root / "spec.json").write_text(spec)
    slurmrestd = root / "sbin" / "slurmrestd"
    slurmrestd.write_text(FAKE)
    slurmrestd.chmod(0o755)
    return root


def calls(root: Path) -> list[str]:
    return (root / "calls").read_text().splitlines()


def test_generated_once_and_cached_per_build(tmp_path: Path) -> None:
    prefix, cache = fake_build(tmp_path / "slurm"), tmp_path / "cache"
    assert slurm_openapi.load(prefix, cache) == {"openapi": "3.0.3"}
    assert slurm_openapi.load(prefix, cache) == {"openapi": "3.0.3"}
    assert [c for c in calls(prefix) if c != "-V"] == ["--generate-openapi-spec -s slurmctld,slurmdbd -d v0.0.44"]
    (cached,) = cache.iterdir()  # no temporary file left
    assert cached.name.startswith("slurmrestd-25.11.7-v0.0.44-") and cached.suffix == ".json"
    other = fake_build(tmp_path / "other")
    assert slurm_openapi.cache_path(other, cache) != cached


@pytest.mark.parametrize(("spec", "error"), [("not json", "printed no JSON"), ("", "printed no JSON")])
def test_a_bad_description_is_an_error(tmp_path: Path, spec: str, error: str) -> None:
    with pytest.raises(slurm_openapi.SpecError, match=error):
        slurm_openapi.load(fake_build(tmp_path / "slurm", spec), tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_failing_slurmrestd_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = fake_build(tmp_path / "slurm")
    (prefix / "sbin" / "slurmrestd").write_text("#!/bin/sh\necho 'fatal: no plugins' >&2\nexit 1\n")
    monkeypatch.setattr(conftest, "SLURM_PREFIX", prefix)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"could not be generated: .*exited 1: fatal: no plugins"):
        conftest.slurmrestd_description()


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_no_build_skips_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch, ci: str,
                                           outcome: type[BaseException]) -> None:
    monkeypatch.setattr(conftest, "SLURM_PREFIX", None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=r"Slurm 25\.11 is not built: `make slurm` builds it"):
        conftest.slurmrestd_description()


def test_the_description_is_slurm_25_11s_v0044(slurmrestd_openapi: dict[str, Any]) -> None:
    meta = slurmrestd_openapi["info"]["x-slurm"]
    assert (meta["version"]["major"], meta["version"]["minor"]) == ("25", "11")
    assert [p["plugin"] for p in meta["data_parsers"]] == ["v0.0.44"]
    assert sorted(meta["openapi"]) == ["openapi/slurmctld", "openapi/slurmdbd"]
