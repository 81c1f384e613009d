"""MariaDB for slurmdbd, with its data directory inside the state directory (fresh state = fresh DB)."""

from __future__ import annotations

import shutil
import subprocess

from slurm.local.config import DB_NAME, DB_PASSWORD, DB_USER, MARIADB_PORT
from slurm.local.errors import LocalSlurmError
from slurm.local.layout import StateLayout
from slurm.local.process import program


def argv(layout: StateLayout) -> list[str]:
    # --no-defaults: ignore /etc/mysql (its socket, port and datadir belong to the system MariaDB).
    return [
        program("mariadbd"),
        "--no-defaults",
        "--user=mysql",
        f"--datadir={layout.mysql_data}",
        f"--socket={layout.mysql_socket}",
        f"--port={MARIADB_PORT}",
        "--bind-address=127.0.0.1",
        "--skip-name-resolve",
        f"--pid-file={layout.mysql / 'mariadbd.pid'}",
        f"--log-error={layout.mysql / 'mariadbd.err'}",
    ]


def prepare(layout: StateLayout) -> None:
    """Create the data directory on first start; every path mariadbd writes must be owned by mysql."""
    layout.mysql.mkdir(parents=True, exist_ok=True)
    shutil.chown(layout.mysql, "mysql", "mysql")
    if (layout.mysql_data / "mysql").is_dir():
        return
    command = [
        program("mariadb-install-db"),
        "--no-defaults",
        "--user=mysql",
        f"--datadir={layout.mysql_data}",
        "--auth-root-authentication-method=socket",
        "--skip-test-db",
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise LocalSlurmError(f"mariadb-install-db failed:\n{(result.stderr or result.stdout).strip()}")


def create_accounting_user(layout: StateLayout) -> None:
    """The DB user slurmdbd logs in as over TCP (idempotent)."""
    statements = (
        f"CREATE DATABASE IF NOT EXISTS {DB_NAME};"
        f"CREATE USER IF NOT EXISTS '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}';"
        f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'127.0.0.1';"
    )
    command = [
        program("mariadb"),
        "--no-defaults",
        f"--socket={layout.mysql_socket}",
        "-u",
        "root",
        "-e",
        statements,
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise LocalSlurmError(f"creating the accounting DB user failed: {result.stderr.strip()}")
