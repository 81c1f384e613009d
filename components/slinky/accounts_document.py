"""The desired Slurm accounts, users and QoS as the document the in-cluster reconcile reads (its schema is
slurm/agent/contract.py AccountsDocument, which the reconcile parses with; the two meet only through it).

Stable and made for review: keys sorted, one setting per line when indented, TRES as sacctmgr writes them
(`gres/gpu=64`), so a pull request that lowers a team's GPUs shows `"GrpTRES": "gres/gpu=64"` ->
`"GrpTRES": "gres/gpu=32"` under that QoS. A user's default account is the first account (in the stack's
order) that lists them.
"""

from __future__ import annotations

from components.config.cluster import ClusterConfig
from components.config.health import HEALTH_ACCOUNT
from components.config.teams import Account, Qos
from components.slinky.health_settings import ACTIVE_CHECK_USER, active_checks
from slurm.agent.contract import ROOT_ACCOUNT, AccountDocument, AccountsDocument, QosDocument, UserDocument


def _tres(counts: dict[str, int]) -> str:
    return ",".join(f"{name}={count}" for name, count in sorted(counts.items()))


def _qos(qos: Qos) -> QosDocument:
    return QosDocument(qos.description, qos.priority, _tres(qos.grp_tres), _tres(qos.max_tres_per_user),
                       _tres(qos.max_tres_per_job), qos.max_jobs_per_user, qos.max_submit_jobs_per_user,
                       qos.max_wall)


def _account(account: Account) -> AccountDocument:
    return AccountDocument(account.description, account.organization, account.parent or ROOT_ACCOUNT,
                           account.fairshare, tuple(sorted(account.qos)), account.default_qos,
                           _tres(account.grp_tres))


def desired_document(config: ClusterConfig, cluster_name: str) -> AccountsDocument:
    """`cluster_name` is the Controller's clusterName (slurmdbd keeps it in lower case, slurm.conf(5))."""
    memberships: dict[str, list[str]] = {}
    accounts = dict(config.slurm.accounts)
    if accounts and active_checks(config):
        # The active checks' probes (jobs of `slurm`) need an association once associations are enforced.
        accounts[HEALTH_ACCOUNT] = Account(description="slurm-eks active checks (node health probes)",
                                           users=[ACTIVE_CHECK_USER])
    for name, account in accounts.items():
        for user in account.users:
            memberships.setdefault(user, []).append(name)
    return AccountsDocument(
        cluster=cluster_name.lower(),
        qos={name: _qos(qos) for name, qos in config.slurm.qos.items()},
        accounts={name: _account(account) for name, account in accounts.items()},
        users={user: UserDocument(tuple(sorted(accounts)), accounts[0]) for user, accounts in memberships.items()},
    )


def desired_json(config: ClusterConfig, cluster_name: str) -> str:
    return desired_document(config, cluster_name).json()
