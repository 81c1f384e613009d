"""The desired Slurm accounts, users and QoS as the JSON document the in-cluster reconcile reads
(slurm/accounts/desired.py documents the format; the two meet only through this document).

Stable and made for review: keys sorted, one setting per line when indented, TRES as sacctmgr writes them
(`gres/gpu=64`), so a pull request that lowers a team's GPUs shows `"GrpTRES": "gres/gpu=64"` ->
`"GrpTRES": "gres/gpu=32"` under that QoS. A user's default account is the first account (in the stack's
order) that lists them.
"""

from __future__ import annotations

import json
from typing import Any

from components.config.cluster import ClusterConfig
from components.config.health import HEALTH_ACCOUNT
from components.config.teams import Account, Qos
from components.slinky.health_settings import ACTIVE_CHECK_USER, active_checks

FORMAT = 1


def _tres(counts: dict[str, int]) -> str:
    return ",".join(f"{name}={count}" for name, count in sorted(counts.items()))


def _qos(qos: Qos) -> dict[str, Any]:
    return {"Description": qos.description, "Priority": qos.priority, "GrpTRES": _tres(qos.grp_tres),
            "MaxTRESPerUser": _tres(qos.max_tres_per_user), "MaxTRESPerJob": _tres(qos.max_tres_per_job),
            "MaxJobsPerUser": qos.max_jobs_per_user, "MaxSubmitJobsPerUser": qos.max_submit_jobs_per_user,
            "MaxWall": qos.max_wall}


def _account(account: Account) -> dict[str, Any]:
    return {"Description": account.description, "Organization": account.organization,
            "Parent": account.parent or "root", "Fairshare": account.fairshare, "QOS": sorted(account.qos),
            "DefaultQOS": account.default_qos, "GrpTRES": _tres(account.grp_tres)}


def desired_document(config: ClusterConfig, cluster_name: str) -> dict[str, Any]:
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
    return {
        "format": FORMAT,
        "cluster": cluster_name.lower(),
        "qos": {name: _qos(qos) for name, qos in config.slurm.qos.items()},
        "accounts": {name: _account(account) for name, account in accounts.items()},
        "users": {user: {"Accounts": sorted(accounts), "DefaultAccount": accounts[0]}
                  for user, accounts in memberships.items()},
    }


def desired_json(config: ClusterConfig, cluster_name: str) -> str:
    return json.dumps(desired_document(config, cluster_name), indent=2, sort_keys=True) + "\n"
