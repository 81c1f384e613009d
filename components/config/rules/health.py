"""Rules on node health: which partitions may run active bandwidth checks."""

from __future__ import annotations

from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.health import HEALTH_ACCOUNT
from components.config.rules.registry import Found, rule


@rule("health-active-checks")
def health_active_checks(c: ClusterConfig) -> Iterator[Found]:
    for name in c.health.active_checks.partitions:
        if name not in c.partitions:
            yield Found(f"health.activeChecks.partitions.{name}", name, "no such partition",
                        f"use one of {', '.join(c.partitions)}")
    if HEALTH_ACCOUNT in c.slurm.accounts:
        yield Found(f"slurm.accounts.{HEALTH_ACCOUNT}", HEALTH_ACCOUNT, "the account the active checks' probes "
                    "run under (the stack makes it when it declares accounts)", "name your account differently")
