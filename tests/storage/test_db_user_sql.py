"""The DB-user Job's script and SQL against a real MariaDB: a throwaway mariadbd with TLS (its own CA), a master
user like RDS's, and the script run as the Job runs it. `slurm` must write slurm_acct_db, must not read
mysql.user nor create a database, and must not log in without TLS; broken grants show each check firing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.slinky.accounting_db import DATABASE
from components.slinky.accounting_db_user import grant_script, grant_sql
from tests.conftest import require_tool

# mariadbd is in /usr/sbin, off a normal user's PATH; a missing one fails under CI=true (tests/conftest.py).
MARIADBD = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin") or require_tool(
    "mariadbd", "make test installs it: apt-get install mariadb-server")
require_tool("mariadb", "make test installs it: apt-get install mariadb-client")
require_tool("openssl")
MASTER = ("dbadmin", 'p"a\\ss/w0rd')  # a password with every character JSON escapes in RDS's secret


@dataclass(frozen=True)
class Server:
    port: int
    ca: Path
    root: Path

    def client(self, user: str, password: str, sql: str, tls: bool = True) -> subprocess.CompletedProcess[str]:
        ssl = [f"--ssl-ca={self.ca}", "--ssl-verify-server-cert"] if tls else ["--skip-ssl"]
        return subprocess.run(["mariadb", "--no-defaults", "--host=127.0.0.1", f"--port={self.port}", f"--user={user}",
                               *ssl, "--batch", "-e", sql], env={**os.environ, "MYSQL_PWD": password},
                              capture_output=True, text=True, timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _certificates(tls: Path) -> None:
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tls)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
            "-out", "server.csr")
    (tls / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-extfile", "ext", "-out", "server.pem")


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    # Not under pytest's tmp_path: its parents are root-only, and mariadbd runs as mysql.
    with tempfile.TemporaryDirectory(prefix="slurm-db-user-") as tmp:
        yield from _serve(Path(tmp))


def _serve(root: Path) -> Iterator[Server]:
    data, tls = root / "data", root / "tls"
    tls.mkdir()
    _certificates(tls)
    for path in (root, tls, *tls.iterdir()):  # mariadbd runs as mysql and reads its key
        shutil.chown(path, "mysql", "mysql")
    subprocess.run(["mariadb-install-db", "--no-defaults", "--user=mysql", f"--datadir={data}",
                    "--auth-root-authentication-method=socket", "--skip-test-db"], check=True, capture_output=True)
    port, sock = _free_port(), root / "mysqld.sock"
    daemon = subprocess.Popen([MARIADBD, "--no-defaults", "--user=mysql", f"--datadir={data}", f"--socket={sock}",
                               f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                               f"--ssl-ca={tls / 'ca.pem'}", f"--ssl-cert={tls / 'server.pem'}",
                               f"--ssl-key={tls / 'server.key'}", f"--log-error={root / 'err.log'}"])
    try:
        for _ in range(120):
            if sock.exists():
                break
            time.sleep(0.25)
        user, password = MASTER
        # Like RDS's master user: every privilege with GRANT OPTION, over TCP; slurm_acct_db made by RDS (db_name).
        subprocess.run(["mariadb", "--no-defaults", f"--socket={sock}", "-u", "root", "-e",
                        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password.replace(chr(92), chr(92) * 2)}';"
                        f"GRANT ALL ON *.* TO '{user}'@'%' WITH GRANT OPTION; CREATE DATABASE {DATABASE};"],
                       check=True, capture_output=True, timeout=30)
        yield Server(port, tls / "ca.pem", root)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)


def run_job(server: Server, sql: str, slurm_password: str) -> subprocess.CompletedProcess[str]:
    """The Job's container script, with the files its init container and the Secret volume would give it."""
    work = Path(server.root / "work")
    work.mkdir(exist_ok=True)
    user, password = MASTER
    (work / "master.json").write_text(json.dumps({"username": user, "password": password}).replace("/", "\\/"))
    (work / "slurm-password").write_text(slurm_password)
    env = {**os.environ, "MASTER_SECRET_FILE": str(work / "master.json"), "CA_FILE": str(server.ca),
           "SLURM_PASSWORD_FILE": str(work / "slurm-password"), "DB_HOST": "127.0.0.1", "DB_PORT": str(server.port)}
    return subprocess.run(["bash", "-c", grant_script(sql)], env=env, capture_output=True, text=True, timeout=60)


def violations(server: Server, user: str, password: str) -> list[str]:
    """What the slurmdbd user may do beyond its database, or cannot do within it."""
    found = []
    table = f"{DATABASE}.probe_{user}"
    if server.client(user, password, f"CREATE TABLE {table} (i INT); INSERT INTO {table} VALUES (1); "
                                     f"SELECT i FROM {table}; DROP TABLE {table};").returncode:
        found.append("cannot write slurm_acct_db")
    if server.client(user, password, "SELECT User FROM mysql.user").returncode == 0:
        found.append("reads mysql.user")
    if server.client(user, password, f"CREATE DATABASE other_{user}").returncode == 0:
        found.append("creates a database")
    if server.client(user, password, "SELECT 1", tls=False).returncode == 0:
        found.append("logs in without TLS")
    return found


def test_slurm_user_has_its_database_only(server: Server) -> None:
    result = run_job(server, grant_sql("slurm", DATABASE), "FirstPassword1")
    assert result.returncode == 0, result.stderr
    assert violations(server, "slurm", "FirstPassword1") == []


def test_rerun_rotates_the_password(server: Server) -> None:
    assert run_job(server, grant_sql("slurm", DATABASE), "FirstPassword1").returncode == 0
    result = run_job(server, grant_sql("slurm", DATABASE), "SecondPassword2")
    assert result.returncode == 0, result.stderr
    assert server.client("slurm", "SecondPassword2", "SELECT 1").returncode == 0
    assert server.client("slurm", "FirstPassword1", "SELECT 1").returncode != 0


@pytest.mark.parametrize(("user", "sql", "expected"), [
    ("wide", "CREATE USER 'wide'@'%' IDENTIFIED BY '${SLURM_PASSWORD}' REQUIRE SSL;\n"
             "GRANT ALL ON *.* TO 'wide'@'%';\n",
     ["reads mysql.user", "creates a database"]),
    ("plain", f"CREATE USER 'plain'@'%' IDENTIFIED BY '${{SLURM_PASSWORD}}';\n"
              f"GRANT ALL ON {DATABASE}.* TO 'plain'@'%';\n",
     ["logs in without TLS"]),
    ("nogrant", "CREATE USER 'nogrant'@'%' IDENTIFIED BY '${SLURM_PASSWORD}' REQUIRE SSL;\n",
     ["cannot write slurm_acct_db"]),
])
def test_checks_fire_on_broken_grants(server: Server, user: str, sql: str, expected: list[str]) -> None:
    assert run_job(server, sql, "BrokenPassword3").returncode == 0
    assert violations(server, user, "BrokenPassword3") == expected


@pytest.mark.parametrize("password", ["has space", "quote'd", "semi;colon"])
def test_refuses_a_password_that_could_change_the_sql(server: Server, password: str) -> None:
    result = run_job(server, grant_sql("slurm", DATABASE), password)
    assert result.returncode != 0 and "alphanumeric" in result.stderr


def test_refuses_a_server_whose_certificate_it_cannot_verify(server: Server, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other",
                    "-keyout", str(tmp_path / "k"), "-out", str(other)], check=True, capture_output=True)
    wrong = Server(server.port, other, server.root)
    result = run_job(wrong, grant_sql("slurm", DATABASE), "FirstPassword1")
    assert result.returncode != 0 and "database user ready" not in result.stdout
