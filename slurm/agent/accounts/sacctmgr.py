"""Running sacctmgr: argument lists, never a shell (a description with spaces or quotes stays one argument).

Reads use `--noheader --parsable2` (fields separated by '|', no trailing '|'); changes use `--immediate`
(commit without asking). Both options: SchedMD/slurm slurm-25-11-6-1 doc/man/man1/sacctmgr.1 "OPTIONS".
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from slurm.agent.accounts.errors import AccountsError

SACCTMGR = "sacctmgr"
TIMEOUT_S = 120  # slurmdbd answers in well under a second; a hung connection must not hang the Job


class SacctmgrError(AccountsError):
    """sacctmgr failed; the message carries its command line and what it printed."""


def run(args: Sequence[str]) -> str:
    """`sacctmgr ARGS`: its standard output, or SacctmgrError with its message."""
    program = shutil.which(SACCTMGR)
    if program is None:
        raise SacctmgrError("sacctmgr is not on PATH: run this where the Slurm client commands are installed")
    command = [program, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SacctmgrError(f"`sacctmgr {' '.join(args)}` gave no answer in {TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = (done.stderr.strip() + "\n" + done.stdout.strip()).strip() or "no message"
        raise SacctmgrError(f"`sacctmgr {' '.join(args)}` failed (exit {done.returncode}): {said}")
    return done.stdout


def show(entity: str, fields: Sequence[str], *conditions: str) -> str:
    """`sacctmgr show ENTITY CONDITIONS format=FIELDS`, parsable: read it with `rows`."""
    return run(["--noheader", "--parsable2", "show", entity, *conditions, f"format={','.join(fields)}"])


def rows(text: str, width: int) -> list[list[str]]:
    """Parsable output as rows of `width` fields. The last field takes any '|' left over, so a free-text
    field (a description) goes last."""
    return [line.split("|", width - 1) for line in text.splitlines() if line.strip()]


def change(args: Sequence[str]) -> str:
    """A change (`add ...`, `modify ...`, `remove ...`), committed at once."""
    return run(["--immediate", *args])
