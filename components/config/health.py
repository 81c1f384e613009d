"""`health`: the checks every Slurm node runs (slurm/node/node-check.sh), the repair controller that has
Karpenter replace nodes they drained, the active bandwidth checks, and how long a queue may wait before an
alert. On by default; the keys only tune it. Without Pulumi, so the config can import it."""

from __future__ import annotations

from pydantic import Field

from components.config.base import Duration, Model
from components.config.teams import SlurmName

# The Slurm account the active checks run under (slurmctld enforces associations): the stack makes it
# (components/slinky/accounts_document.py), and an account of that name declared in slurm.accounts is refused.
HEALTH_ACCOUNT = "slurm-eks-health"

class ActiveCheck(Model):
    """One partition's active check: a one-node collective (nccl-tests all_reduce_perf, or the Neuron
    collectives test on Trainium) on each idle node, every `health.activeChecks.interval`."""

    enabled: bool = True
    # Nodes measured below this bus bandwidth (GB/s) are drained; unset: only the relative rule applies.
    min_bus_bandwidth_gbps: float | None = Field(None, alias="minBusBandwidthGBps", gt=0)


class ActiveChecks(Model):
    interval: Duration = "24h"
    # A node below this fraction of the round's median (3 or more nodes measured) is drained too.
    relative_floor: float = Field(0.8, gt=0, lt=1)
    # Nodes of one partition measured per round at most, so checks never take a whole partition.
    max_nodes_per_round: int = Field(2, ge=1)
    # Opt in or out per partition. Unset partitions: on for accelerator partitions with minNodes > 0, off for
    # minNodes 0 (a check keeps a node busy, so the partition would not scale back to zero on time).
    partitions: dict[SlurmName, ActiveCheck] = Field(default_factory=dict)


class Repair(Model):
    # false: the controller only logs what it would replace (and still runs the active checks and metrics).
    enabled: bool = True
    # Replacements per partition in any rolling hour; more wait (an alert fires on a repair loop).
    max_replacements_per_hour: int = Field(2, ge=1)


class Health(Model):
    # slurm.conf HealthCheckInterval: seconds between node-check.sh runs on each node (slurmd also runs it
    # when it starts, before it registers).
    check_interval: int = Field(300, ge=60)
    min_free_disk_mib: int = Field(10240, alias="minFreeDiskMiB", ge=0)
    # DCGM diagnostics level 1 (seconds, non-invasive) in the periodic check where dcgmi is installed; 0 off.
    dcgm_diag_level: int = Field(1, ge=0, le=1)
    repair: Repair = Field(default_factory=Repair)
    active_checks: ActiveChecks = Field(default_factory=ActiveChecks)
    # Alert when a partition has had pending jobs and no node taking them for this long.
    pending_alert_after: Duration = "30m"
    grafana_storage_gib: int = Field(10, alias="grafanaStorageGiB", ge=1)
