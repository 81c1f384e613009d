"""slurmdbd.conf as slurm-operator v1.2.1 writes it (internal/builder/accountingbuilder/accounting_config.go
buildSlurmdbdConf; its Go test only checks the text is non-empty), the hash annotations (internal/utils/crypto/
hash.go) and the embedded scripts' stand-ins."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from scripts.twin.operator import hashes, names, scripts
from scripts.twin.operator.slurmdbd import build_slurmdbd_conf
from tests.twin.operator_plan import slinky

ACCOUNTING = {
    "kind": "Accounting", "metadata": {"name": "slurm", "namespace": "slurm"},
    "spec": {"storageConfig": {"host": "mariadb", "username": "slurm",
                               "passwordKeyRef": {"name": "mariadb-password", "key": "password"}},
             "extraConf": "CommitDelay=1\nAuthAltParameters=disable_token_creation"},
}

WANT = """#
### GENERAL ###
DbdHost=slurm-accounting-0
DbdPort=6819
SlurmUser=slurm
#
### PLUGINS & PARAMETERS ###
AuthType=auth/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
AuthInfo=use_client_ids
#
### STORAGE ###
StorageType=accounting_storage/mysql
StorageHost=mariadb
StoragePort=3306
StorageUser=slurm
StorageLoc=slurm_acct_db
StoragePass=s3cret
#
### LOGGING ###
LogFile=/dev/null
#
### EXTRA CONFIG ###
CommitDelay=1
AuthAltParameters=disable_token_creation
#
### MERGED CONFIG ###
AuthAltParameters=disable_token_creation,jwt_key=/etc/slurm/jwt.key
"""


def test_slurmdbd_conf_exact_text_with_defaults_and_merged_config() -> None:
    assert build_slurmdbd_conf(ACCOUNTING, "s3cret") == WANT
    assert names.accounting_storage_password_ref(ACCOUNTING) == {"name": "mariadb-password", "key": "password"}


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_stack_slurmdbd_conf(stack: str) -> None:
    acc = slinky(stack).accounting
    storage = acc["spec"]["storageConfig"]
    conf = build_slurmdbd_conf(acc, "PASSWORD")
    assert conf.startswith("#\n### GENERAL ###\nDbdHost=slurm-accounting-0\nDbdPort=6819\nSlurmUser=slurm\n")
    assert (f"StorageType=accounting_storage/mysql\nStorageHost={storage['host']}\nStoragePort={storage['port']}\n"
            f"StorageUser={storage['username']}\nStorageLoc={storage['database']}\nStoragePass=PASSWORD\n") in conf
    extra = acc["spec"].get("extraConf")
    assert conf.endswith(f"#\n### EXTRA CONFIG ###\n{extra}\n" if extra else "#\n### LOGGING ###\nLogFile=/dev/null\n")
    assert names.accounting_storage_password_ref(acc) == storage["passwordKeyRef"]


def test_checksums() -> None:
    assert hashes.checksum(b"") == hashlib.sha256(b"").hexdigest()
    assert hashes.checksum_from_map({}) == ""
    assert hashes.checksum_from_map({"b": "2", "a": b"1"}) == hashlib.sha256(b"12").hexdigest()
    ann = hashes.controller_hash_annotations(False, {"slurm.key": b"k"}, None, {"slurm.conf": "x"})
    assert ann == {"slinky.slurm.net/slurm-key-hash": hashlib.sha256(b"k").hexdigest(),
                   "slinky.slurm.net/jwt-key-hash": "",
                   "slinky.slurm.net/slurm-config-hash": hashlib.sha256(b"x").hexdigest()}
    assert "slinky.slurm.net/slurm-config-hash" not in hashes.controller_hash_annotations(True, None, None, None)


@pytest.mark.parametrize(("name", "shell"), [("LOGFILE", "sh"), ("INITCONF", "sh"), ("RECONFIGURE", "bash")])
def test_scripts_parse(name: str, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"no {shell}")
    subprocess.run([shell, "-n", "-c", getattr(scripts, name)], check=True)
