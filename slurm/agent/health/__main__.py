"""`python3 -m slurm.agent.health --settings settings.json`: the node lifecycle controller's loop
(components/lifecycle/node_repair.py renders the settings and runs this in the cluster). Each pass: repair
(controller.repair_pass), the active checks' round (active_runner), the network topology from EC2
(slurm/agent/topology/sync.py) and the maintenance reservations over Capacity Blocks' ends
(slurm/agent/capacity/blocks.py) where the stack has them, then sleep. A step that fails is logged
and the next one runs. Metrics on /metrics the whole time; beside the loop, a thread of its own counts the nodes the
pending jobs want (demand.py) every few seconds, for KEDA, whatever a pass is busy with.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from slurm.agent import contract
from slurm.agent.aws import ec2_client
from slurm.agent.capacity.blocks import capacity_pass
from slurm.agent.capacity.reservations import ReservationError
from slurm.agent.health.active_runner import ActiveChecks, PartitionCheck, Probe
from slurm.agent.health.controller import Log, log_json, repair_pass
from slurm.agent.health.demand import demand_pass
from slurm.agent.health.ledger import ConfigMapLedger, LedgerStore
from slurm.agent.health.repair import Policy
from slurm.agent.health.slurm_access import CliSlurm, SlurmAccess
from slurm.agent.kube import Kube, KubeError
from slurm.agent.metrics import Registry, serve
from slurm.agent.topology.instance_topology import InstanceTopology
from slurm.agent.topology.sync import TopologySettings, topology_pass

# What a topology or Capacity Block step may fail with; anything else is a bug and stops the controller. botocore
# raises ClientError for an error EC2 answered (after its retries) and a BotoCoreError for one it met on the way:
# no credentials, an endpoint it could not reach (botocore/exceptions.py).
STEP_ERRORS = (ClientError, BotoCoreError, KubeError, ReservationError, ValueError, OSError)


@dataclass
class Controller:
    """What the settings make: the repair policy, whether it acts, and the active checks."""

    policy: Policy
    act: bool  # repair.enabled: false only logs what it would replace
    checks: ActiveChecks
    pass_seconds: float
    topology: TopologySettings | None = None  # None: no EFA partition, nothing to place
    blocks: dict[str, list[str]] = field(default_factory=dict)  # partition -> its Capacity Block ids
    region: str = ""
    placed: dict[str, InstanceTopology] = field(default_factory=dict)  # the topology step's instances, kept
    demand: dict[str, int] = field(default_factory=dict)  # partition -> its maxNodes (demand.py)
    demand_seconds: float = 15.0

    @classmethod
    def from_settings(cls, document: dict[str, Any], probe: Probe | None = None) -> Controller:
        """From the settings document, as slurm/agent/contract.py LifecycleSettings defines it."""
        settings = contract.LifecycleSettings.parse(document)
        checks = {name: PartitionCheck(c.kind, c.ranks, c.floor_gbps)
                  for name, c in settings.active_partitions.items()}
        topology = settings.topology
        return cls(Policy(max_per_hour=settings.repair_max_per_hour), settings.repair_enabled,
                   ActiveChecks(checks, settings.active_interval_seconds, settings.active_relative_floor,
                                settings.active_max_nodes_per_round, probe or Probe(Path(settings.active_output_dir))),
                   settings.pass_seconds,
                   TopologySettings(topology.name, topology.namespace, topology.pod_selector, topology.config_map,
                                    topology.key) if topology else None,
                   {p: list(ids) for p, ids in settings.capacity_blocks.items()},
                   settings.region,
                   demand=dict(settings.demand_max_nodes),
                   demand_seconds=settings.demand_seconds)

    @property
    def uses_ec2(self) -> bool:
        return self.topology is not None or bool(self.blocks)

    def one_pass(self, slurm: SlurmAccess, kube: Kube, ledger: LedgerStore, metrics: Registry, now: float,
                 log: Log = log_json, ec2: BaseClient | None = None) -> None:
        repair_pass(slurm, kube, ledger, self.policy, metrics, now, dry_run=not self.act, log=log)
        self.checks.round(slurm, metrics, now, log)
        if ec2 is None:
            return
        if self.topology is not None:
            _step("topology", lambda: topology_pass(kube, ec2, self.topology, log, self.placed), log)
        if self.blocks:
            moment = datetime.fromtimestamp(now, UTC)
            _step("capacity-blocks", lambda: [log({"event": "reservation", "argv": argv}) for argv in
                                              capacity_pass(ec2, self.blocks, moment)], log)


def _step(name: str, run: Callable[[], object], log: Log) -> None:
    try:
        run()
    except STEP_ERRORS as exc:
        log({"event": "error", "step": name, "error": str(exc)})


def demand_loop(slurm: SlurmAccess, metrics: Registry, max_nodes: dict[str, int], seconds: float,
                stop: threading.Event, log: Log = log_json) -> None:
    """demand_pass every `seconds` until `stop` is set."""
    while True:
        demand_pass(slurm, metrics, max_nodes, time.time(), log)
        if stop.wait(seconds):
            return


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m slurm.agent.health")
    parser.add_argument("--settings", type=Path, required=True)
    settings = json.loads(parser.parse_args(argv).settings.read_text())
    controller = Controller.from_settings(settings)
    metrics = Registry()
    serve(metrics, port=contract.LifecycleSettings.parse(settings).metrics_port)
    slurm, kube = CliSlurm(), Kube.in_cluster()
    if controller.demand:
        threading.Thread(target=demand_loop, name="demand", daemon=True, args=(
            CliSlurm(), metrics, controller.demand, controller.demand_seconds, threading.Event())).start()
    parsed = contract.LifecycleSettings.parse(settings)
    ledger = ConfigMapLedger(kube, parsed.ledger_config_map, parsed.namespace)
    ec2 = ec2_client(controller.region) if controller.uses_ec2 else None
    while True:
        controller.one_pass(slurm, kube, ledger, metrics, time.time(), ec2=ec2)
        time.sleep(controller.pass_seconds)


if __name__ == "__main__":
    main()
