"""The login pod's sshd as the real `sshd -T` reads it: keys only, per-user keys from the stack or the directory,
root only by key and only when the stack lists root's keys. sshd keeps the first value of a keyword, so the
config is the whole file Slinky writes, with our part where the operator puts it."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.config.teams import Identity
from components.slinky import identity
from tests.conftest import require_tool

USERS = Identity.model_validate({"groups": {"ml": 30001}, "users": {"alice": {"uid": 20001, "groups": ["ml"]}}})
DIRECTORY = Identity.model_validate({"ldap": {"uri": "ldaps://ldap.example.com", "baseDN": "dc=example,dc=com"}})
NOBODY = 65534


def operator_sshd_config(extra: str, include_dir: Path) -> str:
    """sshd_config as slurm-operator v1.2.1 writes it (internal/builder/loginbuilder/login_config.go
    buildSshdConfig), with its Include pointed at `include_dir` (Slinky's login image ships no drop-in there)."""
    return (f"#\n### GENERAL ###\nInclude {include_dir}/*.conf\nUsePAM yes\nX11Forwarding yes\n"
            f"Subsystem sftp internal-sftp\n#\n### EXTRA CONFIG ###\n{extra}\n")


@dataclass(frozen=True)
class Sshd:
    """`sshd -T` of the operator's file around an extraSshdConfig, for one connecting user. As root, sshd -T
    wants the privilege separation directory (/run/sshd), so it runs as nobody, with a host key of its own."""

    binary: str
    work: Path

    @property
    def drop_ins(self) -> Path:
        return self.work / "sshd_config.d"

    def settings(self, extra: str, login: str) -> dict[str, str]:
        config = self.work / "sshd_config"
        config.write_text(f"HostKey {self.work / 'host_key'}\n{operator_sshd_config(extra, self.drop_ins)}")
        config.chmod(0o644)
        user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
        result = subprocess.run([*user, self.binary, "-T", "-f", str(config), "-C",
                                 f"user={login},host=h,addr=192.0.2.1"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return dict(line.split(" ", 1) for line in result.stdout.splitlines())


@pytest.fixture
def sshd() -> Iterator[Sshd]:
    # Not under pytest's tmp_path, whose parents nobody may not enter.
    with tempfile.TemporaryDirectory(prefix="sshd-") as work:
        found = Sshd(require_tool("sshd", "apt-get install openssh-server"), Path(work))
        found.work.chmod(0o755)
        found.drop_ins.mkdir()
        host_key = found.work / "host_key"
        subprocess.run([require_tool("ssh-keygen", "apt-get install openssh-client"), "-q", "-t", "ed25519", "-N",
                        "", "-f", str(host_key)], check=True)
        if os.geteuid() == 0:
            os.chown(host_key, NOBODY, NOBODY)
        yield found


def test_people_log_in_with_the_stacks_keys_only_and_root_not_at_all(sshd: Sshd) -> None:
    extra = identity.sshd_config(USERS, root_keys=False)
    for login in ("alice", "root"):
        found = sshd.settings(extra, login)
        assert found["permitrootlogin"] == "no"
        assert (found["passwordauthentication"], found["kbdinteractiveauthentication"]) == ("no", "no")
        assert found["authorizedkeysfile"] == f"{identity.KEYS_DIR}/%u"
        assert found["usepam"] == "yes"


def test_listed_root_keys_let_root_in_by_key_alone(sshd: Sshd) -> None:
    extra = identity.sshd_config(USERS, root_keys=True)
    root = sshd.settings(extra, "root")
    assert root["permitrootlogin"] == "without-password"  # how sshd -T spells prohibit-password
    assert root["authorizedkeysfile"] == ".ssh/authorized_keys"  # the operator mounts root's keys there
    assert root["passwordauthentication"] == "no"
    assert sshd.settings(extra, "alice")["authorizedkeysfile"] == f"{identity.KEYS_DIR}/%u"


def test_directory_users_keys_come_from_sssd(sshd: Sshd) -> None:
    found = sshd.settings(identity.sshd_config(DIRECTORY, root_keys=False), "alice")
    assert found["authorizedkeyscommand"] == f"{identity.SSS_AUTHORIZED_KEYS} %u"
    assert found["authorizedkeyscommanduser"] == "nobody"
    assert found["authorizedkeysfile"] == "none"
    assert found["permitrootlogin"] == "no"


def test_a_keyword_set_before_ours_would_win(sshd: Sshd) -> None:
    """Why the operator's part is checked: a drop-in in the image's sshd_config.d, read first, would override
    every setting above."""
    (sshd.drop_ins / "50-image.conf").write_text("PermitRootLogin yes\nPasswordAuthentication yes\n")
    found = sshd.settings(identity.sshd_config(USERS, root_keys=False), "root")
    assert (found["permitrootlogin"], found["passwordauthentication"]) == ("yes", "yes")

