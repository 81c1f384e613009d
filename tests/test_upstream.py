"""Nothing copied from upstream in the project: the MPI Operator's release manifest is pinned by URL and SHA-256
(components/upstream.py), read from its cache (build/upstream), which `make upstream` fills from ../shared/upstream
or the release URL; bytes with another digest are refused, a missing file is an error that names its path, the
pinned digest and `make upstream`, and only a stack that enables addons.mpiOperator needs it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components import upstream
from components.addons import k8s_operators
from components.config.problems import ConfigError
from components.config.stackfile import load_stack
from scripts.cli.main import app
from scripts.offline.mocks import RealisticMocks
from scripts.offline.plan import record, run_plan
from tests.conftest import REPO, SHARED, require_shared, require_tool
from tools.fetch_upstream import main as fetch_main

MPI = upstream.MPI_OPERATOR
TAMPERED = (b"mpioperator/mpi-operator:0.8.0", b"mpioperator/mpi-operator:latest")


@pytest.fixture(scope="module")
def release() -> bytes:
    """The release manifest as ../shared/upstream holds it."""
    return (require_shared("upstream") / MPI.path).read_bytes()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache in place of build/upstream; no download may happen."""
    monkeypatch.setattr(upstream, "CACHE", tmp_path / "cache")

    def offline(url: str, timeout: float = 60) -> bytes:
        raise AssertionError(f"downloaded {url}")

    monkeypatch.setattr(upstream, "fetch_url", offline)
    return tmp_path / "cache"


def test_the_pin_is_the_release_file_shared_holds(release: bytes) -> None:
    assert hashlib.sha256(release).hexdigest() == MPI.sha256
    assert MPI.url == f"https://raw.githubusercontent.com/kubeflow/mpi-operator/{MPI.version}/deploy/v2beta1/" \
                      "mpi-operator.yaml"
    assert MPI.path == f"mpi-operator/mpi-operator-{MPI.version}.yaml"
    assert upstream.PINNED == (MPI,)


def test_no_tracked_file_is_a_copy_of_an_upstream_file() -> None:
    upstream_files = [p for sub in ("upstream", "crds") for p in sorted((require_shared(sub)).rglob("*"))
                      if p.is_file() and p.stat().st_size < 64 << 20]
    digests = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in upstream_files}
    digests.update({f.sha256: Path(f.url) for f in upstream.PINNED})
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    copies = {name: str(digests[d]) for name in tracked.decode().split("\0")
              if name and (REPO / name).is_file()
              and (d := hashlib.sha256((REPO / name).read_bytes()).hexdigest()) in digests}
    assert copies == {}


def test_a_tampered_cache_is_refused_naming_path_digest_and_fix(cache: Path, release: bytes) -> None:
    path = cache / MPI.path
    path.parent.mkdir(parents=True)
    path.write_bytes(release.replace(*TAMPERED))
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    for call in (lambda: upstream.read(MPI), k8s_operators.mpi_operator_objects):
        with pytest.raises(upstream.UpstreamError) as error:
            call()
        assert f"{path} has sha256 {got}, not the pinned {MPI.sha256}" in str(error.value)
        assert "make upstream" in str(error.value)


def test_a_missing_cache_is_a_clear_error(cache: Path) -> None:
    with pytest.raises(upstream.UpstreamError) as error:
        k8s_operators.mpi_operator_objects()
    assert str(error.value) == (f"{cache / MPI.path} is missing (the pinned {MPI.url}, sha256 {MPI.sha256}): "
                                f"{upstream.FIX}")


def test_the_offline_plan_of_a_stack_that_needs_it_stops_with_the_fix(cache: Path) -> None:
    assert load_stack("prod")[0].addons.mpi_operator is not None
    with pytest.raises(ConfigError) as error:
        run_plan("prod")
    [problem] = error.value.findings
    assert (problem.rule, problem.path, problem.value) == ("upstream-cache", "addons.mpiOperator",
                                                           str(cache / MPI.path))
    assert MPI.sha256 in problem.message and "make upstream" in problem.fix
    # As users see it: the config-error exit (2) and the problem, no traceback.
    result = CliRunner().invoke(app, ["plan", "--stack", "prod", "--out", str(cache.parent / "plan")])
    assert result.exit_code == 2, result.output
    assert "error[upstream-cache] addons.mpiOperator" in result.output and "make upstream" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_a_stack_without_the_mpi_operator_plans_without_the_cache(cache: Path) -> None:
    assert load_stack("dev")[0].addons.mpi_operator is None
    plan, _ = run_plan("dev")
    assert not cache.exists()
    assert not any(d["kind"] == "CustomResourceDefinition" for d in plan.manifests())


def test_the_offline_plan_reads_the_cache_and_never_downloads(cache: Path) -> None:
    assert upstream.fill(mirror=require_shared("upstream"), download=False) == []
    plan, _ = run_plan("prod")
    assert {d["metadata"]["name"] for d in plan.manifests() if d["kind"] == "CustomResourceDefinition"} == {
        "mpijobs.kubeflow.org"}


def test_only_a_pulumi_engine_may_download() -> None:
    seen: list[bool] = []
    record(lambda: seen.append(k8s_operators.deploying()), "upstream", RealisticMocks("us-east-1", "upstream"))
    assert seen == [False]  # the offline plan's mocks
    assert k8s_operators.deploying() is False  # no Pulumi at all (a test, a script)


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No access log on stderr."""


@pytest.fixture
def served(tmp_path: Path, release: bytes) -> Iterator[tuple[Path, str]]:
    """The release manifest on 127.0.0.1, as `pulumi up` would fetch it (a copy a test may tamper with)."""
    root = tmp_path / "served"
    root.mkdir()
    (root / "mpi-operator.yaml").write_bytes(release)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/mpi-operator.yaml"
    server.shutdown()
    server.server_close()


def test_a_deploy_downloads_verifies_and_caches(tmp_path: Path, served: tuple[Path, str], release: bytes) -> None:
    _, url = served
    pin = upstream.UpstreamFile(MPI.path, url, MPI.version, MPI.sha256)
    assert upstream.read(pin, tmp_path / "cache", download=True, timeout=10) == release
    assert (tmp_path / "cache" / MPI.path).read_bytes() == release
    assert [p.name for p in (tmp_path / "cache" / MPI.path).parent.iterdir()] == [Path(MPI.path).name]


def test_a_deploy_refuses_a_download_with_another_digest(tmp_path: Path, served: tuple[Path, str]) -> None:
    root, url = served
    (root / "mpi-operator.yaml").write_bytes((root / "mpi-operator.yaml").read_bytes().replace(*TAMPERED))
    pin = upstream.UpstreamFile(MPI.path, url, MPI.version, MPI.sha256)
    with pytest.raises(upstream.UpstreamError, match=rf"refused, sha256 \w+ is not the pinned {MPI.sha256}"):
        upstream.read(pin, tmp_path / "cache", download=True, timeout=10)
    assert not (tmp_path / "cache" / MPI.path).parent.exists() or not any(
        (tmp_path / "cache" / MPI.path).parent.iterdir())
    missing = upstream.UpstreamFile(MPI.path, url.replace("mpi-operator.yaml", "gone.yaml"), MPI.version, MPI.sha256)
    with pytest.raises(upstream.UpstreamError, match=r"gone\.yaml: HTTP Error 404.*make upstream"):
        upstream.read(missing, tmp_path / "cache", download=True, timeout=10)


def test_fetch_upstream_fills_from_the_mirror_and_refuses_a_tampered_one(tmp_path: Path, release: bytes,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    mirror, cache = tmp_path / "mirror", tmp_path / "cache"
    (mirror / MPI.path).parent.mkdir(parents=True)
    (mirror / MPI.path).write_bytes(release.replace(*TAMPERED))
    assert fetch_main(["--cache", str(cache), "--mirror", str(mirror), "--offline"]) == 1
    assert "refused" in capsys.readouterr().err and not (cache / MPI.path).exists()
    (mirror / MPI.path).write_bytes(release)
    assert fetch_main(["--cache", str(cache), "--mirror", str(mirror), "--offline"]) == 0
    assert (cache / MPI.path).read_bytes() == release
    # A rerun with the file in place needs neither the mirror nor the network.
    shutil.rmtree(mirror)
    assert fetch_main(["--cache", str(cache), "--mirror", str(mirror), "--offline"]) == 0
    (cache / MPI.path).unlink()
    assert fetch_main(["--cache", str(cache), "--mirror", str(mirror), "--offline"]) == 1
    assert "downloads are off" in capsys.readouterr().err


def test_make_upstream_fills_the_cache_from_shared(tmp_path: Path, release: bytes) -> None:
    make = require_tool("make")
    shared = tmp_path / "shared"
    shutil.copytree(SHARED / "upstream" / "mpi-operator", shared / "upstream" / "mpi-operator")
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    result = subprocess.run([make, "-s", "upstream", f"SHARED={shared}", f"UPSTREAM_CACHE={cache}"], cwd=REPO,
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (cache / MPI.path).read_bytes() == release
    assert f"{cache}: 1/1 upstream files verified" in result.stdout
