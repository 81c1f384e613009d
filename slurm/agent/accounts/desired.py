"""The desired state: the accounts document the stack renders (components/slinky/accounts.py) read into the model.

The document's schema is slurm/agent/contract.py AccountsDocument (format 1), shared with the side that writes
it; this module checks what sacctmgr can store and that every name an object refers to is declared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slurm.agent.accounts import values
from slurm.agent.accounts.errors import AccountsError
from slurm.agent.accounts.model import DEFAULT_QOS, ROOT_ACCOUNT, Account, Qos, State, User
from slurm.agent.contract import AccountDocument, AccountsDocument, QosDocument, UserDocument
from slurm.agent.contract import DocumentError as ContractError


class DocumentError(AccountsError):
    """The document cannot be reconciled as written; the message says where."""


def load(path: Path) -> State:
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DocumentError(f"{path}: {exc}") from None
    return parse(document)


def parse(document: Mapping[str, Any]) -> State:
    try:
        return state(AccountsDocument.parse(document))
    except (ContractError, TypeError, ValueError) as exc:
        raise DocumentError(str(exc)) from None


def state(document: AccountsDocument) -> State:
    qos = {name: _qos(name, spec) for name, spec in document.qos.items()}
    accounts = {name: _account(name, spec) for name, spec in document.accounts.items()}
    users = {name: _user(name, spec) for name, spec in document.users.items()}
    result = State(cluster=document.cluster, qos=qos, accounts=accounts, users=users)
    _check_references(result)
    return result


def _text(where: str, text: str) -> str:
    # sacctmgr's parsable output separates fields with '|' and records with newlines.
    if "|" in text or "\n" in text:
        raise DocumentError(f"{where}: '|' and line breaks cannot be stored in a sacctmgr field")
    return values.stored_text(text)


def _managed_description(where: str, name: str, description: str | None) -> str:
    return _text(f"{where}.Description", f"{description or name} {values.MARKER}")


def _qos(name: str, spec: QosDocument) -> Qos:
    where = f"qos.{name}"
    if name == DEFAULT_QOS:
        raise DocumentError(f"{where}: `normal` is Slurm's own default QoS; declare a QoS of your own")
    return Qos(name=name, description=_managed_description(where, name, spec.description),
               priority=spec.priority,
               grp_tres=values.tres(spec.grp_tres),
               max_tres_per_user=values.tres(spec.max_tres_per_user),
               max_tres_per_job=values.tres(spec.max_tres_per_job),
               max_jobs_per_user=spec.max_jobs_per_user,
               max_submit_jobs_per_user=spec.max_submit_jobs_per_user,
               max_wall=values.minutes(spec.max_wall or ""))


def _account(name: str, spec: AccountDocument) -> Account:
    where = f"accounts.{name}"
    if name == ROOT_ACCOUNT:
        raise DocumentError(f"{where}: `root` is the top of Slurm's account tree; declare accounts below it")
    organization = spec.organization
    return Account(name=name, description=_managed_description(where, name, spec.description),
                   parent=spec.parent,
                   organization=None if organization is None else _text(f"{where}.Organization", organization),
                   fairshare=spec.fairshare,
                   qos=frozenset(spec.qos),
                   default_qos=spec.default_qos,
                   grp_tres=values.tres(spec.grp_tres))


def _user(name: str, spec: UserDocument) -> User:
    accounts = list(spec.accounts)
    default = spec.default_account or (accounts[0] if accounts else None)
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
