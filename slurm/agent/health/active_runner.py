"""The active checks as the controller runs them, one round per pass: collect the probes that finished (their
output file, active_parse), record the bandwidth, drain nodes below the threshold (active.judge, against the
latest number of every node of the partition, so a round of one or two nodes is still judged against its
peers), then start probes on idle nodes (active.probe_targets) as Slurm jobs pinned to those nodes.

A probe's output goes to `output_dir` on the shared file system, which the probe (on the node) and the
controller both mount. What the controller knows is kept in memory: after a restart every idle node is due
again, still at most `per_round` per partition at a time. Metrics go through slurm/agent/metrics.py
(prometheus_client); the rest is standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurm.agent import contract as m
from slurm.agent.health.active import (
    NCCL_TESTS_BIN,
    NCCL_TESTS_IMAGE,
    NEURON_IMAGE,
    judge,
    nccl_bus_bandwidth,
    nccl_script,
    neuron_bus_bandwidth,
    neuron_script,
    probe_targets,
)
from slurm.agent.health.slurm_access import SlurmAccess, SlurmError
from slurm.agent.metrics import Registry

Log = Callable[[dict[str, Any]], None]
# squeue's states of a job that may still write its output (squeue(1) JOB STATE CODES); anything else is over.
UNFINISHED = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                        "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED"})
PARSERS = {"nccl": nccl_bus_bandwidth, "neuron": neuron_bus_bandwidth}


@dataclass(frozen=True)
class PartitionCheck:
    kind: str  # "nccl" (GPUs) or "neuron" (Trainium)
    ranks: int  # GPUs, or NeuronCores (components/catalog.py neuron_cores): one rank each
    floor_gbps: float | None = None


@dataclass(frozen=True)
class Probe:
    """How a probe runs: the images, and for the local tests a stand-in binary on the host without pyxis."""

    output_dir: Path
    nccl_image: str | None = NCCL_TESTS_IMAGE
    neuron_image: str = NEURON_IMAGE
    nccl_binary: str = NCCL_TESTS_BIN
    mpi: str = "pmix"

    def script(self, check: PartitionCheck) -> str:
        if check.kind == "nccl":
            return nccl_script(check.ranks, self.nccl_image, str(self.output_dir), binary=self.nccl_binary,
                               mpi=self.mpi)
        return neuron_script(check.ranks, self.neuron_image, str(self.output_dir))


@dataclass
class ActiveChecks:
    checks: dict[str, PartitionCheck]
    interval_s: float
    fraction: float
    per_round: int
    probe: Probe
    running: dict[int, tuple[str, str]] = field(default_factory=dict)  # job id -> (partition, node)
    last_probed: dict[str, float] = field(default_factory=dict)
    latest: dict[str, dict[str, float]] = field(default_factory=dict)  # partition -> node -> GB/s

    def round(self, slurm: SlurmAccess, metrics: Registry, now: float, log: Log) -> None:
        def error(step: str, exc: Exception | str, **fields: Any) -> None:
            metrics.inc(m.REPAIR_ERRORS, {"step": step})
            log({"time": now, "event": "error", "step": step, "error": str(exc), **fields})

        if not self.checks:
            return
        measured = self._collect(slurm, metrics, error)
        for partition, values in measured.items():
            check = self.checks[partition]
            for node, reason in judge(self.latest[partition], check.floor_gbps, self.fraction, check.kind):
                if node not in values:
                    continue  # judged when it was measured; a later peer does not re-drain it
                try:
                    slurm.drain(node, reason)
                except SlurmError as exc:
                    error("active-drain", exc, node=node)
                    continue
                metrics.inc(m.ACTIVE_CHECK_DRAINS, {"partition": partition, "check": check.kind})
                log({"time": now, "event": "drain", "node": node, "partition": partition, "reason": reason})
        try:
            nodes = slurm.nodes()
        except (SlurmError, OSError, ValueError) as exc:
            error("slurm-nodes", exc)
            return
        for partition, check in self.checks.items():
            busy = sum(1 for p, _ in self.running.values() if p == partition)
            members = [(n.name, n.states, n.alloc_cpus) for n in nodes if n.partition == partition]
            for node in probe_targets(members, self.last_probed, now, self.interval_s, self.per_round - busy):
                try:
                    job_id = slurm.submit(self.probe.script(check), partition, node, f"slurm-eks-{check.kind}-check")
                except SlurmError as exc:
                    error("active-submit", exc, node=node)
                    continue
                self.running[job_id] = (partition, node)
                self.last_probed[node] = now
                log({"time": now, "event": "probe", "node": node, "partition": partition, "job": job_id})

    def _collect(self, slurm: SlurmAccess, metrics: Registry,
                 error: Callable[..., None]) -> dict[str, dict[str, float]]:
        measured: dict[str, dict[str, float]] = {}
        for job_id, (partition, node) in list(self.running.items()):
            try:
                state = slurm.job_state(job_id)
            except SlurmError as exc:
                error("active-state", exc, job=job_id)
                continue
            if state in UNFINISHED:
                continue
            del self.running[job_id]
            output = self.probe.output_dir / f"{job_id}.out"
            kind = self.checks[partition].kind
            value = PARSERS[kind](output.read_text(errors="replace")) if output.exists() else None
            if value is None:  # no clean run: reported, never a reason to drain
                error("active-result", f"job {job_id} ended {state} without a bandwidth in {output}", node=node)
                continue
            metrics.set(m.BUS_BANDWIDTH, {"partition": partition, "node": node, "check": kind}, value)
            self.latest.setdefault(partition, {})[node] = value
            measured.setdefault(partition, {})[node] = value
        return measured
