"""tools/fetch_crds.py (`make crds`) against a local HTTP server: it fetches every file of tools/crds.json, whose
SHA-256s must match the upstream copies the tests read (crds_dir), and refuses a file whose bytes differ."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tools.fetch_crds import MANIFEST, fetch, main, sha256

PINNED = json.loads(MANIFEST.read_text())["files"]


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No access log on stderr: it would bury the test's own output."""


@pytest.fixture
def served(tmp_path: Path, crds_dir: Path) -> Iterator[tuple[Path, str]]:
    """A copy of the CRDs served on 127.0.0.1 (a copy, so a test may tamper with it)."""
    root = tmp_path / "upstream"
    shutil.copytree(crds_dir, root)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def local_manifest(tmp_path: Path, base: str) -> Path:
    """The checked-in manifest with each URL pointed at the local server; the hashes stay the pinned ones."""
    path = tmp_path / "crds.json"
    path.write_text(json.dumps({"files": [{**e, "url": f"{base}/{e['path']}"} for e in PINNED]}))
    return path


def test_the_manifest_pins_every_crd_to_a_commit(crds_dir: Path) -> None:
    assert sorted(e["path"] for e in PINNED) == sorted(str(p.relative_to(crds_dir)) for p in crds_dir.glob("*/*.yaml"))
    for entry in PINNED:
        assert sha256((crds_dir / entry["path"]).read_bytes()) == entry["sha256"], entry["path"]
        assert entry["url"].startswith("https://raw.githubusercontent.com/"), entry
        assert len(entry["url"].split("/")[5]) == 40, f"not pinned to a commit: {entry['url']}"


def test_fetches_and_verifies_every_file(tmp_path: Path, served: tuple[Path, str]) -> None:
    root, base = served
    dest = tmp_path / "crds"
    assert fetch(local_manifest(tmp_path, base), dest) == []
    for entry in PINNED:
        assert (dest / entry["path"]).read_bytes() == (root / entry["path"]).read_bytes()
    # A rerun with everything in place fetches nothing: the server may be gone.
    (root / PINNED[0]["path"]).unlink()
    assert fetch(local_manifest(tmp_path, base), dest) == []


def test_refuses_a_tampered_file(tmp_path: Path, served: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    root, base = served
    tampered = PINNED[0]["path"]
    (root / tampered).write_bytes((root / tampered).read_bytes().replace(b"type: object", b"type: string", 1))
    dest = tmp_path / "crds"
    assert main(["--manifest", str(local_manifest(tmp_path, base)), "--dest", str(dest)]) == 1
    assert f"{tampered}: refused, sha256 {sha256((root / tampered).read_bytes())}" in capsys.readouterr().err
    assert not (dest / tampered).exists()
    assert [p.name for p in (dest / tampered).parent.iterdir() if p.suffix == ".partial"] == []
    assert all((dest / e["path"]).is_file() for e in PINNED[1:])


def test_a_file_the_server_lacks_is_a_problem_not_a_crash(tmp_path: Path, served: tuple[Path, str]) -> None:
    root, base = served
    (root / PINNED[-1]["path"]).unlink()
    problems = fetch(local_manifest(tmp_path, base), tmp_path / "crds")
    assert len(problems) == 1 and problems[0].startswith(PINNED[-1]["path"]) and "404" in problems[0]
