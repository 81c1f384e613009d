"""How many nodes each partition's pending jobs want, counting only jobs that would start if the nodes existed:
what KEDA scales the NodeSets on (components/lifecycle/autoscaling.py nodes_needed_query reads NODES_WANTED).

Slurm 25.11's own `slurm_partition_jobs_pending` counts every pending job of the partition, held ones included
(SchedMD/slurm slurm-25-11-7-1 src/slurmctld/statistics.c _statistics_part_aggregate_job), and its OpenMetrics
have no per-reason series (src/plugins/metrics/openmetrics/openmetrics.c). So a held job, a job over its QoS or
association cap, or one waiting for a dependency or a begin time would keep idle GPU nodes up. This reads the
pending jobs (`squeue --json`) and counts a job's nodes only when its pending reason says it waits for nodes
(job_state_reason strings: src/common/job_state_reason.c):

- `None`: not looked at by the scheduler yet; `Priority`: jobs before it take the nodes there are;
  `Resources`: it waits for nodes.
- `PartitionConfig`, `PartitionNodeLimit`: the partition has fewer nodes or CPUs than the job asks for
  (src/slurmctld/job_mgr.c _part_access_check: ESLURM_TOO_MANY_REQUESTED_CPUS, ESLURM_INVALID_NODE_COUNT
  against the partition's total; node_scheduler.c: ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE). A job in a
  partition scaled to zero waits with one of these (tests/integration/test_scale_from_zero.py); Slinky's own
  `slurm_partition_jobs_wait_part_node_limit` counts the second for autoscaling. A job asking for more nodes
  than the partition's `maxNodes` could never start: it counts 0.
- `ReqNodeNotAvail`: its nodes are down, drained or not responding (node_scheduler.c ESLURM_NODE_NOT_AVAIL);
  `NodeDown`: a job requeued after its node failed (job_mgr.c FAIL_DOWN_NODE). Nodes that come up serve them.
- `BeginTime` counts only when the begin time is at most SOON_S away: every requeue waits `requeue_delay`,
  121 s by default (job_mgr.c batch_requeue_fini: now + cred_expire (120 s) + 1), and the rendered job
  scripts requeue at each checkpointed stop, so their nodes must not be given away meanwhile; a job that
  starts tomorrow counts 0.

Everything else counts 0: held jobs (`JobHeldUser`, `JobHeldAdmin`, or the `hold` flag), dependencies
(`Dependency`, `DependencyNeverSatisfied`), QoS and association limits (`QOS*`, `Assoc*`, `Max*PerAccount`,
...), `Reservation`, licenses, array throttles (`JobArrayTaskLimit`), and any reason a later Slurm adds. A job
pending while its last run still completes (`PENDING` with the `COMPLETING` flag) counts 0: its nodes are
still busy, and counted so. A job pending in several partitions counts in the first it names (Slurm starts it
wherever nodes free up first). Each job counts its minimum node count; a pending array record counts once per
pending task (at most its `%` throttle).

Metrics go through slurm/agent/metrics.py (prometheus_client); the rest is standard library.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from slurm.agent import contract as m
from slurm.agent.health.controller import Log, log_json
from slurm.agent.health.slurm_access import SlurmAccess, SlurmError
from slurm.agent.health.slurm_json import number
from slurm.agent.metrics import Registry

WAITING_FOR_NODES = frozenset({"None", "Priority", "Resources", "PartitionConfig", "PartitionNodeLimit",
                               "ReqNodeNotAvail", "NodeDown"})
BEGIN_TIME = "BeginTime"
# A begin time this close counts as now: a requeue's 121 s, and a node takes minutes to come up anyway.
SOON_S = 300


def _states(value: Any) -> list[str]:
    """"PENDING" (22.05) or ["PENDING", "COMPLETING", ...] (25.11): base state first, then flags."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return [str(item).upper() for item in items]


_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def array_tasks(text: str) -> int:
    """Task ids in a pending array record's `array_task_string` ("0-99", "1,3,5-9:2", "0-9%2"; cut short with
    "..." past SLURM_BITSTR_LEN, src/common/slurm_protocol_defs.c xlate_array_task_str): at least 1."""
    body = text.split("%", 1)[0]
    truncated = body.endswith("...")
    items = body.removesuffix("...").split(",")
    if truncated:
        items = items[:-1] or items  # the last item may be cut in the middle
    count = 0
    for item in items:
        found = _RANGE.match(item.strip())
        if found:
            low, high, step = int(found.group(1)), int(found.group(2) or found.group(1)), int(found.group(3) or 1)
            count += max((high - low) // step + 1, 0)
    return max(count, 1)


def job_nodes(job: Mapping[str, Any], max_nodes: Mapping[str, int], now: float) -> tuple[str, int]:
    """(partition, nodes it wants) of one squeue job; 0 nodes when it would not start if nodes existed."""
    partition = str(job.get("partition") or "").split(",")[0]
    states = _states(job.get("job_state"))
    # Still completing its last run (a requeue): its nodes are busy, and counted so. Held by a requeue flag.
    if not states or states[0] != "PENDING" or set(states[1:]) & {"COMPLETING", "REQUEUE_HOLD", "SPECIAL_EXIT",
                                                                   "RESV_DEL_HOLD"}:
        return partition, 0
    if job.get("hold") is True or number(job.get("priority")) == 0:  # held: priority 0 (scontrol hold)
        return partition, 0
    reason = str(job.get("state_reason") or "None")
    if reason == BEGIN_TIME:
        begin = number(job.get("eligible_time"))
        if begin is None or begin > now + SOON_S:
            return partition, 0
    elif reason not in WAITING_FOR_NODES:
        return partition, 0
    nodes = max(number(job.get("node_count")) or 1, 1)
    if partition not in max_nodes or nodes > max_nodes[partition]:
        return partition, 0  # another cluster's partition, or more nodes than it may ever have
    tasks = 1
    array = job.get("array_task_string")
    if isinstance(array, str) and array:
        tasks = array_tasks(array)
        throttle = number(job.get("array_max_tasks")) or 0
        if throttle > 0:
            tasks = min(tasks, throttle)
    return partition, nodes * tasks


def nodes_wanted(document: Mapping[str, Any], max_nodes: Mapping[str, int], now: float) -> dict[str, int]:
    """Per partition of `max_nodes` (name -> maxNodes), the nodes its pending jobs that could start want."""
    wanted = dict.fromkeys(max_nodes, 0)
    for job in document.get("jobs") or []:
        partition, nodes = job_nodes(job, max_nodes, now)
        if nodes:
            wanted[partition] += nodes
    return wanted


def demand_pass(slurm: SlurmAccess, metrics: Registry, max_nodes: Mapping[str, int], now: float,
                log: Log = log_json) -> dict[str, int] | None:
    """Read the pending jobs and publish every partition's series, 0 included. When Slurm cannot be read the
    series go away (a stale count would hold nodes or starve jobs), and the KEDA query falls back to Slurm's
    own count, as it does while this controller is down."""
    try:
        wanted = nodes_wanted(slurm.pending_jobs(), max_nodes, now)
    except (SlurmError, OSError, ValueError, TypeError, AttributeError) as exc:
        metrics.replace(m.NODES_WANTED, [])
        metrics.inc(m.REPAIR_ERRORS, {"step": "slurm-pending-jobs"})
        log({"time": now, "event": "error", "step": "slurm-pending-jobs", "error": str(exc)})
        return None
    metrics.replace(m.NODES_WANTED, [({"partition": p}, n) for p, n in wanted.items()])
    return wanted
