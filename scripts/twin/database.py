"""The accounting database as the Accounting object finds it: MariaDB from Debian, started in the twin.

- `in-cluster` stacks (the plan's mariadb-operator `MariaDB` object): a pod labelled as mariadb-operator labels
  the MariaDB it runs (mariadb-operator 26.6.0 pkg/builder/labels/labels.go WithMariaDBSelectorLabels, as the deploy
  check has it), so the plan's NetworkPolicies apply to it; the database and the user with the password
  Secret come from the object's spec (`database`, `username`, `passwordSecretKeyRef`), as the operator makes them.
- `rds` stacks: a host outside the cluster (an address in the VPC, no pod, no policy of its own) that serves TLS
  with a certificate authority the twin makes; the user is made as the plan's `slurm-db-user` Job's SQL makes it
  (`REQUIRE SSL`). Two things the twin stands in for, and says so: the Job reading the RDS master secret from
  Secrets Manager, and the Accounting's init container fetching the RDS CA bundle from truststore.pki.rds.amazonaws.com
  (the twin's CA goes where that bundle would).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from scripts.twin.errors import TwinError
from scripts.twin.pods import Container, Mount

PORT = 3306
MYSQL_USER = "mysql"


@dataclass(frozen=True)
class DatabaseSpec:
    host: str  # the name slurmdbd connects to (Accounting storageConfig.host)
    database: str
    user: str
    password: str
    tls: bool  # RDS: the user must connect over TLS


def _uid(name: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def certificate_authority(directory: Path, host: str) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for `host` (openssl). Returns (ca.pem, server.pem, server.key)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (directory / n for n in ("ca.key", "ca.pem", "server.key", "server.csr",
                                                           "server.pem"))
    if cert.exists():
        return ca, cert, key
    commands = [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=slurm-eks twin CA",
         "-keyout", str(ca_key), "-out", str(ca)],
        # A subject's CN holds at most 64 characters (RFC 5280 ub-common-name); the host goes in subjectAltName.
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=slurm-eks twin server", "-keyout", str(key),
         "-out", str(csr)],
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
         "-days", "30", "-out", str(cert), "-extfile", "/dev/stdin"],
    ]
    for command in commands:
        extra = f"subjectAltName=DNS:{host}\n" if "x509" in command and "-req" in command else None
        result = subprocess.run(command, input=extra, capture_output=True, text=True)
        if result.returncode != 0:
            raise TwinError(f"`{' '.join(command[:3])}` failed: {result.stderr.strip()}")
    uid, gid = _uid(MYSQL_USER)
    shutil.chown(key, uid, gid)
    key.chmod(0o600)
    return ca, cert, key


def prepare_datadir(datadir: Path) -> None:
    """An empty MariaDB data directory, initialised once (mariadb-install-db), owned by mysql."""
    if (datadir / "mysql").exists():
        return
    datadir.mkdir(parents=True, exist_ok=True)
    shutil.chown(datadir, MYSQL_USER, MYSQL_USER)
    result = subprocess.run(["mariadb-install-db", f"--datadir={datadir}", f"--user={MYSQL_USER}",
                             "--auth-root-authentication-method=socket", "--skip-test-db"],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise TwinError(f"mariadb-install-db failed: {(result.stderr or result.stdout).strip()[-800:]}")


def server_container(datadir: Path, run_dir: Path, tls: tuple[Path, Path, Path] | None) -> Container:
    """mariadbd in the foreground on port 3306 of its network namespace."""
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir, MYSQL_USER, MYSQL_USER)
    argv = ["/usr/sbin/mariadbd", f"--user={MYSQL_USER}", "--datadir=/var/lib/mysql", "--bind-address=0.0.0.0",
            f"--port={PORT}", "--socket=/run/mysqld/mysqld.sock", "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M"]
    mounts = [Mount(str(datadir), "/var/lib/mysql"), Mount(str(run_dir), "/run/mysqld")]
    if tls:
        ca, _cert, _key = tls
        argv += ["--ssl-ca=/etc/mysql/twin-tls/ca.pem", "--ssl-cert=/etc/mysql/twin-tls/server.pem",
                 "--ssl-key=/etc/mysql/twin-tls/server.key"]
        mounts.append(Mount(str(ca.parent), "/etc/mysql/twin-tls", readonly=True))
    return Container("mariadb", argv, {"PATH": "/usr/sbin:/usr/bin:/bin"}, mounts)


def setup_sql(spec: DatabaseSpec) -> str:
    """The database and its user, as the operator (in-cluster) or the slurm-db-user Job (RDS) makes them."""
    require = " REQUIRE SSL" if spec.tls else ""
    return (f"CREATE DATABASE IF NOT EXISTS `{spec.database}`;\n"
            f"CREATE USER IF NOT EXISTS '{spec.user}'@'%' IDENTIFIED BY '{spec.password}'{require};\n"
            f"ALTER USER '{spec.user}'@'%' IDENTIFIED BY '{spec.password}'{require};\n"
            f"GRANT ALL PRIVILEGES ON `{spec.database}`.* TO '{spec.user}'@'%';\nFLUSH PRIVILEGES;\n")
