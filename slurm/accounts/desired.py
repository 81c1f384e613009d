"""The desired state: the JSON document the stack renders (components/slinky/accounts.py) read into the model.

The document (format 1) keys each object by name and each setting by sacctmgr's name:
  {"format": 1, "cluster": "<ClusterName>",
   "qos": {"<name>": {"Description", "Priority", "GrpTRES", "MaxTRESPerUser", "MaxTRESPerJob",
                      "MaxJobsPerUser", "MaxSubmitJobsPerUser", "MaxWall"}},
   "accounts": {"<name>": {"Description", "Organization", "Parent", "Fairshare", "QOS", "DefaultQOS",
                           "GrpTRES"}},
   "users": {"<name>": {"Accounts", "DefaultAccount"}}}
TRES as sacctmgr writes them (`gres/gpu=64,cpu=512`, mem in MiB), times as Slurm time strings, null for
"no limit" (and, for Organization, "leave as it is").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slurm.accounts import values
from slurm.accounts.errors import AccountsError
from slurm.accounts.model import DEFAULT_QOS, ROOT_ACCOUNT, Account, Qos, State, User

FORMAT = 1


class DocumentError(AccountsError):
    """The document cannot be reconciled as written; the message says where."""


def load(path: Path) -> State:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DocumentError(f"{path}: {exc}") from None
    return parse(document)


def parse(document: dict[str, Any]) -> State:
    if document.get("format") != FORMAT:
        raise DocumentError(f"format {document.get('format')!r}: this reconcile reads format {FORMAT}")
    qos = {name: _qos(name, spec) for name, spec in document.get("qos", {}).items()}
    accounts = {name: _account(name, spec) for name, spec in document.get("accounts", {}).items()}
    users = {name: _user(name, spec) for name, spec in document.get("users", {}).items()}
    state = State(cluster=document["cluster"], qos=qos, accounts=accounts, users=users)
    _check_references(state)
    return state


def _text(where: str, text: str) -> str:
    # sacctmgr's parsable output separates fields with '|' and records with newlines.
    if "|" in text or "\n" in text:
        raise DocumentError(f"{where}: '|' and line breaks cannot be stored in a sacctmgr field")
    return values.stored_text(text)


def _managed_description(where: str, name: str, description: str | None) -> str:
    return _text(f"{where}.Description", f"{description or name} {values.MARKER}")


def _count(spec: dict[str, Any], key: str) -> int | None:
    value = spec.get(key)
    return None if value is None else int(value)


def _qos(name: str, spec: dict[str, Any]) -> Qos:
    where = f"qos.{name}"
    if name == DEFAULT_QOS:
        raise DocumentError(f"{where}: `normal` is Slurm's own default QoS; declare a QoS of your own")
    return Qos(name=name, description=_managed_description(where, name, spec.get("Description")),
               priority=int(spec.get("Priority") or 0),
               grp_tres=values.tres(spec.get("GrpTRES") or ""),
               max_tres_per_user=values.tres(spec.get("MaxTRESPerUser") or ""),
               max_tres_per_job=values.tres(spec.get("MaxTRESPerJob") or ""),
               max_jobs_per_user=_count(spec, "MaxJobsPerUser"),
               max_submit_jobs_per_user=_count(spec, "MaxSubmitJobsPerUser"),
               max_wall=values.minutes(spec.get("MaxWall") or ""))


def _account(name: str, spec: dict[str, Any]) -> Account:
    where = f"accounts.{name}"
    if name == ROOT_ACCOUNT:
        raise DocumentError(f"{where}: `root` is the top of Slurm's account tree; declare accounts below it")
    organization = spec.get("Organization")
    return Account(name=name, description=_managed_description(where, name, spec.get("Description")),
                   parent=spec.get("Parent") or ROOT_ACCOUNT,
                   organization=None if organization is None else _text(f"{where}.Organization", organization),
                   fairshare=int(spec.get("Fairshare", 1)),
                   qos=frozenset(spec.get("QOS") or ()),
                   default_qos=spec.get("DefaultQOS"),
                   grp_tres=values.tres(spec.get("GrpTRES") or ""))


def _user(name: str, spec: dict[str, Any]) -> User:
    accounts = list(spec["Accounts"])
    default = spec.get("DefaultAccount") or (accounts[0] if accounts else None)
    if default not in accounts:
        raise DocumentError(f"users.{name}: DefaultAccount {default!r} is not one of its Accounts {accounts}")
    ordered = [default, *(a for a in accounts if a != default)]  # added first, so a new user gets it
    return User(name=name, accounts=tuple(ordered), default_account=default)


def _check_references(state: State) -> None:
    """Every name an object refers to is declared (or is Slurm's own root account / normal QoS)."""
    problems = []
    known_qos = {*state.qos, DEFAULT_QOS}
    for account in state.accounts.values():
        if account.parent not in {*state.accounts, ROOT_ACCOUNT}:
            problems.append(f"accounts.{account.name}.Parent: no account {account.parent!r}")
        problems += [f"accounts.{account.name}.QOS: no QoS {q!r}" for q in sorted(account.qos - known_qos)]
        if account.default_qos is not None and account.default_qos not in known_qos:
            problems.append(f"accounts.{account.name}.DefaultQOS: no QoS {account.default_qos!r}")
    for user in state.users.values():
        problems += [f"users.{user.name}.Accounts: no account {a!r}" for a in user.accounts
                     if a not in state.accounts]
    if problems:
        raise DocumentError("; ".join(problems))
