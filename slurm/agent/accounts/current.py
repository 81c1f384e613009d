"""The current state: what slurmdbd holds for one cluster, read with `sacctmgr show`.

Field names are sacctmgr's format fields (SchedMD/slurm slurm-25-11-6-1 doc/man/man1/sacctmgr.1 "LIST/SHOW
QOS FORMAT OPTIONS", "LIST/SHOW ACCOUNT FORMAT OPTIONS", "LIST/SHOW ASSOCIATION FORMAT OPTIONS"; parsed in
src/sacctmgr/common.c `_get_print_field`, the same names in slurm-22-05-8-1). Associations are read with
`WOPLimits` ("only display limits where they are set instead of propagating them from the parent"), so an
account shows its own QOS list, empty when it inherits its parent's; `OnlyDefaults` lists each user's
default association. Associations with a partition are not the reconcile's and are left out.
"""

from __future__ import annotations

from collections import defaultdict

from slurm.agent.accounts import sacctmgr, values
from slurm.agent.accounts.errors import AccountsError
from slurm.agent.accounts.model import Account, Qos, State, User

QOS_FIELDS = ("Name", "Priority", "GrpTRES", "MaxTRESPerUser", "MaxTRESPerJob", "MaxJobsPerUser",
              "MaxSubmitJobsPerUser", "MaxWall", "Description")
ACCOUNT_FIELDS = ("Account", "Organization", "Description")
ASSOCIATION_FIELDS = ("Account", "User", "Partition", "ParentName", "Fairshare", "GrpTRES", "QOS", "DefaultQOS")
DEFAULT_FIELDS = ("User", "Account", "Partition")


class NotRegistered(AccountsError):
    """slurmdbd does not know the cluster yet (slurmctld registers it when it first connects)."""


def _count(text: str) -> int | None:
    return int(text) if text else None


def parse_qos(text: str) -> dict[str, Qos]:
    found = {}
    for row in sacctmgr.rows(text, len(QOS_FIELDS)):
        name, priority, grp, per_user, per_job, jobs, submit, wall, description = row
        found[name] = Qos(name=name, description=description, priority=int(priority or 0),
                          grp_tres=values.tres(grp), max_tres_per_user=values.tres(per_user),
                          max_tres_per_job=values.tres(per_job), max_jobs_per_user=_count(jobs),
                          max_submit_jobs_per_user=_count(submit), max_wall=values.minutes(wall))
    return found


def parse_accounts(accounts_text: str, associations_text: str) -> dict[str, Account]:
    """Accounts with an association on the cluster (`associations_text`), described by `accounts_text`."""
    entities = {row[0]: row for row in sacctmgr.rows(accounts_text, len(ACCOUNT_FIELDS))}
    found = {}
    for row in sacctmgr.rows(associations_text, len(ASSOCIATION_FIELDS)):
        account, user, partition, parent, share, grp, qos, default_qos = row
        if user or partition:
            continue
        _, organization, description = entities[account]
        found[account] = Account(name=account, description=description, parent=parent,
                                 organization=organization, fairshare=int(share) if share.isdigit() else share,
                                 qos=frozenset(filter(None, qos.split(","))), default_qos=default_qos or None,
                                 grp_tres=values.tres(grp))
    return found


def parse_users(associations_text: str, defaults_text: str) -> dict[str, User]:
    accounts: dict[str, list[str]] = defaultdict(list)
    for account, user, partition, *_ in sacctmgr.rows(associations_text, len(ASSOCIATION_FIELDS)):
        if user and not partition:
            accounts[user].append(account)
    defaults = {user: account for user, account, partition in sacctmgr.rows(defaults_text, len(DEFAULT_FIELDS))
                if not partition}
    return {user: User(name=user, accounts=tuple(sorted(names)), default_account=defaults.get(user))
            for user, names in accounts.items()}


def read(cluster: str) -> State:
    """The state of `cluster`; NotRegistered if slurmdbd has no such cluster."""
    clusters = sacctmgr.rows(sacctmgr.show("cluster", ["Cluster"]), 1)
    if [cluster] not in clusters:
        raise NotRegistered(f"slurmdbd has no cluster {cluster!r} (it has {', '.join(c[0] for c in clusters)}): "
                            "slurmctld registers its ClusterName when it first connects to slurmdbd")
    on_cluster = f"cluster={cluster}"
    associations = sacctmgr.show("association", ASSOCIATION_FIELDS, on_cluster, "WOPLimits")
    defaults = sacctmgr.show("association", DEFAULT_FIELDS, on_cluster, "OnlyDefaults")
    return State(cluster=cluster,
                 qos=parse_qos(sacctmgr.show("qos", QOS_FIELDS)),
                 accounts=parse_accounts(sacctmgr.show("account", ACCOUNT_FIELDS), associations),
                 users=parse_users(associations, defaults))
