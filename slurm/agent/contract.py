"""The contract between the Pulumi side (components/) and the agents (slurm/agent/): each value both sides need,
defined once. Standard library only: components/ imports it without the agents' clients.

Metrics: what the repair controller and the active checks export, by name, with their labels and help.
Dashboards and alert rules (components/observability/) may use only these and the exporters' documented
metrics; tests hold them to that."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # "counter" or "gauge"
    labels: tuple[str, ...]
    help: str


NODES_DRAINED = Metric("slurm_eks_nodes_drained", "gauge", ("partition", "check"),
                       "Nodes drained now by a slurm-eks check, by the check that drained them.")
NODES_DRAINED_BY_PERSON = Metric("slurm_eks_nodes_drained_by_person", "gauge", ("partition",),
                                 "Nodes drained now with a reason a person wrote (never repaired automatically).")
REPLACEMENTS = Metric("slurm_eks_repair_replacements_total", "counter", ("partition", "check"),
                      "Nodes the repair controller had Karpenter replace (NodeClaim deleted).")
REPAIRS_HELD = Metric("slurm_eks_repair_held_total", "counter", ("partition", "why"),
                      "Replacements the controller held back (rate limit, no NodeClaim found, jobs still running).")
REPAIR_ERRORS = Metric("slurm_eks_repair_errors_total", "counter", ("step",),
                       "Controller passes that failed (reading Slurm, reading or deleting Kubernetes objects).")
BUS_BANDWIDTH = Metric("slurm_eks_active_check_bus_bandwidth_gbps", "gauge", ("partition", "node", "check"),
                       "Bus bandwidth (GB/s) the last active check measured on the node (nccl or neuron).")
ACTIVE_CHECK_DRAINS = Metric("slurm_eks_active_check_drains_total", "counter", ("partition", "check"),
                             "Nodes drained because the active check measured them below the threshold.")
# What KEDA scales each partition's NodeSet on (components/lifecycle/autoscaling.py nodes_needed_query), from
# slurm/health/demand.py: Slurm's own slurm_partition_jobs_pending counts held and limit-bound jobs too.
NODES_WANTED = Metric("slurm_eks_partition_nodes_wanted", "gauge", ("partition",),
                      "Nodes the partition's pending jobs would take if nodes existed, summed over the jobs that "
                      "could then start (held, dependent, later-starting, limit-bound and reserved jobs count 0).")
LAST_PASS = Metric("slurm_eks_repair_last_pass_timestamp_seconds", "gauge", (),
                   "When the controller last finished a pass (Unix time): a stale value means it is stuck.")

ALL: tuple[Metric, ...] = (NODES_DRAINED, NODES_DRAINED_BY_PERSON, REPLACEMENTS, REPAIRS_HELD, REPAIR_ERRORS,
                           BUS_BANDWIDTH, ACTIVE_CHECK_DRAINS, NODES_WANTED, LAST_PASS)
