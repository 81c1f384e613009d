"""The accounting state the reconcile compares, as plain data: the same types hold the desired state (from the
stack's document) and the current one (read back from slurmdbd), with values normalised as slurmdbd stores
them (`values`), so equal means "nothing to do".

Each object lists its `settings` under sacctmgr's own names (SchedMD/slurm slurm-25-11-6-1
doc/man/man1/sacctmgr.1: "SPECIFICATIONS FOR QOS", "SPECIFICATIONS FOR ACCOUNTS", "GENERAL SPECIFICATIONS
FOR ASSOCIATION BASED ENTITIES", "SPECIFICATIONS FOR USERS"): the plan compares them one by one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slurm.agent.contract import ROOT_ACCOUNT

DEFAULT_QOS = "normal"  # made by slurmdbd on its first start; the QoS of jobs that name none


@dataclass(frozen=True)
class Qos:
    name: str
    description: str
    priority: int = 0
    grp_tres: dict[str, int] = field(default_factory=dict)
    max_tres_per_user: dict[str, int] = field(default_factory=dict)
    max_tres_per_job: dict[str, int] = field(default_factory=dict)
    max_jobs_per_user: int | None = None
    max_submit_jobs_per_user: int | None = None
    max_wall: int | None = None  # minutes

    def settings(self) -> dict[str, Any]:
        return {"Description": self.description, "Priority": self.priority, "GrpTRES": self.grp_tres,
                "MaxTRESPerUser": self.max_tres_per_user, "MaxTRESPerJob": self.max_tres_per_job,
                "MaxJobsPerUser": self.max_jobs_per_user, "MaxSubmitJobsPerUser": self.max_submit_jobs_per_user,
                "MaxWall": self.max_wall}


@dataclass(frozen=True)
class Account:
    """An account and its association on the cluster (no user, no partition)."""

    name: str
    description: str
    parent: str = ROOT_ACCOUNT
    # None: not managed (sacctmgr's default when the account was made: its own name or its parent's).
    organization: str | None = None
    fairshare: int | str = 1  # shares among siblings, or "parent"
    qos: frozenset[str] = frozenset()  # empty: inherited from the parent
    default_qos: str | None = None
    grp_tres: dict[str, int] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        found = {"Description": self.description, "Organization": self.organization, "Parent": self.parent,
                 "Fairshare": self.fairshare, "QOS": self.qos, "DefaultQOS": self.default_qos,
                 "GrpTRES": self.grp_tres}
        return found if self.organization is not None else {k: v for k, v in found.items() if k != "Organization"}


@dataclass(frozen=True)
class User:
    """A user's associations (one per account, no partition) and default account on the cluster."""

    name: str
    accounts: tuple[str, ...]  # desired: the stack's order, the default first
    default_account: str | None

    def settings(self) -> dict[str, Any]:
        return {"DefaultAccount": self.default_account}


@dataclass(frozen=True)
class State:
    """Everything the reconcile compares on one cluster."""

    cluster: str
    qos: dict[str, Qos] = field(default_factory=dict)
    accounts: dict[str, Account] = field(default_factory=dict)
    users: dict[str, User] = field(default_factory=dict)
