"""tools/install_login_cli.sh: root installs the CLI on the login pods from a tree only root can write, as a wheel into
a root-owned virtualenv on /shared that users run and cannot change. Each refusal is shown on the tree or
directory that would have let a user's code run as root, and the install itself on a real venv."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import unavailable

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "install_login_cli.sh"
NOBODY = 65534


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A release tree as root's fresh clone would be: the files git tracks, root's, mode 0755/0644."""
    if os.geteuid() != 0:
        unavailable("the install runs as root (it refuses anyone else); run the tests as root, as CI does")
    tree = tmp_path / "root-clone"
    tracked = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run([*tracked, "pyproject.toml", "components", "scripts", "jobs", "slurm", "policy", "stacks"],
                           cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        target = tree / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name.decode(), target)
    for path in [tree, *tree.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return tree


def install(source: Path, shared: Path) -> subprocess.CompletedProcess[str]:
    # No dependencies from the index (the runtime's are this venv's, on PYTHONPATH): the test is about where the
    # code comes from and who can write it, not about downloading pulumi again.
    env = {**os.environ, "SLURM_EKS_CLI_DIR": str(shared / "slurm-eks-cli"), "PIP_NO_DEPS": "1",
           "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    return subprocess.run(["bash", str(SCRIPT), str(source)], env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("defect", ["user-writable file", "user-owned file", "user-owned tree"])
def test_a_tree_a_user_could_have_changed_is_refused(source: Path, tmp_path: Path, defect: str) -> None:
    planted = source / "scripts" / "cli" / "main.py"
    if defect == "user-writable file":
        planted.chmod(0o666)
    elif defect == "user-owned file":
        os.chown(planted, NOBODY, NOBODY)
    else:
        os.chown(source, NOBODY, NOBODY)
        planted = source
    shared = tmp_path / "shared"
    shared.mkdir()
    result = install(source, shared)
    assert result.returncode == 1 and f"{planted} is not root's or is writable by others" in result.stderr
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize("squatted", ["slurm-eks-cli", "slurm-eks-cli.d"])
def test_an_install_path_someone_else_made_is_refused(source: Path, tmp_path: Path, squatted: str) -> None:
    shared = tmp_path / "shared"
    (shared / squatted / "bin").mkdir(parents=True)
    os.chown(shared / squatted, NOBODY, NOBODY)  # a user's directory, holding whatever they put in bin/
    result = install(source, shared)
    assert result.returncode == 1 and f"{shared / squatted} exists and is not root's" in result.stderr


def test_the_cli_is_installed_as_a_wheel_only_root_can_change(source: Path, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    first = install(source, shared)
    assert first.returncode == 0, first.stderr
    link = shared / "slurm-eks-cli"
    assert link.is_symlink() and (link / "bin" / "slurm-eks").exists()
    release = link.resolve()
    for path in [release, *release.rglob("*")]:
        info = path.lstat()
        if not stat.S_ISLNK(info.st_mode):
            assert info.st_uid == 0 and not info.st_mode & 0o022, f"{path} can be changed by others"
    # A wheel, not an editable install: no code is read from the source tree any more.
    shutil.rmtree(source / "scripts")
    help_text = subprocess.run([str(link / "bin" / "slurm-eks"), "job", "render", "--help"], capture_output=True,
                               text=True, env={**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]})
    assert help_text.returncode == 0 and "--partition" in help_text.stdout, help_text.stderr
    assert not list(release.rglob("__editable__*")) and not list(release.rglob("*.egg-link"))
