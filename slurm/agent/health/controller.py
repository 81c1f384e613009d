"""One pass of the repair controller: read Slurm's nodes, decide (repair.decide), and for each node to
replace find its NodeClaim (slurmd pod -> spec.nodeName -> NodeClaim status.nodeName), record it in the ledger,
and delete the NodeClaim so Karpenter gives the partition a fresh instance.

Every action is one JSON line on stdout and a counter; an API error is counted (REPAIR_ERRORS, by step) and
logged, and the pass goes on with the next node. Kubernetes and metrics go through the agent's clients
(slurm/agent/kube.py: the official `kubernetes` client; slurm/agent/metrics.py: prometheus_client).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any

from slurm.agent import contract as m
from slurm.agent.health.ledger import Entry, LedgerConflict, LedgerStore
from slurm.agent.health.nodes import SlurmNode
from slurm.agent.health.repair import Decision, Policy, decide
from slurm.agent.health.slurm_access import SlurmAccess, SlurmError
from slurm.agent.kube import Kube, KubeError, NotFound
from slurm.agent.metrics import Registry

Log = Callable[[dict[str, Any]], None]


def log_json(event: dict[str, Any]) -> None:
    print(json.dumps(event, sort_keys=True), file=sys.stdout, flush=True)


def _gauges(nodes: list[SlurmNode], metrics: Registry) -> None:
    metrics.clear(m.NODES_DRAINED)
    metrics.clear(m.NODES_DRAINED_BY_PERSON)
    for part in {n.partition for n in nodes}:
        metrics.set(m.NODES_DRAINED_BY_PERSON, {"partition": part}, 0)  # 0, not absent, for alert rules
    for node in nodes:
        if not node.drain:
            continue
        check = node.check
        if check is None:
            metrics.inc(m.NODES_DRAINED_BY_PERSON, {"partition": node.partition})
        else:
            metrics.inc(m.NODES_DRAINED, {"partition": node.partition, "check": check.check})


def repair_pass(slurm: SlurmAccess, kube: Kube, ledger_store: LedgerStore, policy: Policy, metrics: Registry,
                now: float, *, dry_run: bool = False, log: Log = log_json) -> list[Decision]:
    """Decide and act once; returns the decisions as carried out (a replace that could not be done is a hold)."""

    def error(step: str, exc: Exception, **fields: Any) -> None:
        metrics.inc(m.REPAIR_ERRORS, {"step": step})
        log({"time": now, "event": "error", "step": step, "error": str(exc), **fields})

    try:
        nodes = slurm.nodes()
    except (SlurmError, OSError, ValueError) as exc:
        error("slurm-nodes", exc)
        return []
    _gauges(nodes, metrics)
    try:
        history = ledger_store.load()
    except (KubeError, ValueError, KeyError, TypeError) as exc:
        # Without the history the hourly bound cannot be kept: replace nothing this pass.
        error("ledger-read", exc)
        return []

    done: list[Decision] = []
    for decision in decide(nodes, history, now, policy):
        if decision.kind == "replace":
            decision = _replace(decision, kube, ledger_store, now, dry_run, metrics, log, error)
        elif decision.kind in ("wait", "hold"):
            metrics.inc(m.REPAIRS_HELD, {"partition": decision.partition, "why": decision.why})
            log({"time": now, "event": decision.kind, **dataclasses.asdict(decision)})
        elif decision.why == "person":
            log({"time": now, "event": "ignore", **dataclasses.asdict(decision)})
        done.append(decision)
    metrics.set(m.LAST_PASS, {}, now)
    return done


def _replace(decision: Decision, kube: Kube, ledger_store: LedgerStore, now: float, dry_run: bool,
             metrics: Registry, log: Log, error: Callable[..., None]) -> Decision:
    base = {"time": now, **dataclasses.asdict(decision)}

    def hold(why: str, **fields: Any) -> Decision:
        metrics.inc(m.REPAIRS_HELD, {"partition": decision.partition, "why": why})
        log({**base, "event": "hold", "why": why, **fields})
        return dataclasses.replace(decision, kind="hold", why=why)

    def failed(step: str, exc: Exception, **fields: Any) -> Decision:
        error(step, exc, node=decision.node, partition=decision.partition, **fields)
        return dataclasses.replace(decision, kind="hold", why="error")

    # Slinky names the slurmd pod after the Slurm node (SlinkyProject/slurm-operator v1.2.1
    # internal/controller/nodeset/utils/utils.go GetOrdinalPodName / GetSlurmNodeName) in namespace slurm.
    try:
        k8s_node = kube.pod_node_name(decision.node)
    except NotFound:
        return hold("no-pod")
    except KubeError as exc:
        return failed("get-pod", exc)
    if not k8s_node:
        return hold("no-pod")
    try:
        claim = kube.nodeclaim_for_node(k8s_node)
    except KubeError as exc:
        return failed("list-nodeclaims", exc, k8s_node=k8s_node)
    if claim is None:
        return hold("no-nodeclaim", k8s_node=k8s_node)
    if dry_run:
        log({**base, "event": "replace-dry-run", "k8s_node": k8s_node, "nodeclaim": claim})
        return dataclasses.replace(decision, why="dry-run")
    # Ledger first: with the resourceVersion read at load, two controllers cannot both take the last slot.
    # A delete that then fails leaves the entry, which errs toward fewer replacements, never more.
    try:
        ledger_store.record(Entry(decision.partition, decision.node, decision.check, claim, now), now)
    except LedgerConflict as exc:
        return hold("ledger-conflict", error=str(exc))
    except (KubeError, ValueError) as exc:
        return failed("ledger-write", exc, nodeclaim=claim)
    try:
        kube.delete_nodeclaim(claim)
    except NotFound:
        return hold("nodeclaim-gone", nodeclaim=claim)  # Karpenter (or a person) removed it meanwhile
    except KubeError as exc:
        return failed("delete-nodeclaim", exc, nodeclaim=claim)
    metrics.inc(m.REPLACEMENTS, {"partition": decision.partition, "check": decision.check})
    log({**base, "event": "replace", "k8s_node": k8s_node, "nodeclaim": claim})
    return decision
