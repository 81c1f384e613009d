"""`python3 -m slurm.health --settings settings.json`: the repair controller's loop (components/node_repair.py
renders the settings and runs this in the cluster). Each pass: repair (controller.repair_pass), then the active
checks' round (active_runner), then sleep. Metrics on /metrics the whole time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm.health.active_runner import ActiveChecks, PartitionCheck, Probe
from slurm.health.controller import Log, log_json, repair_pass
from slurm.health.kube import Kube
from slurm.health.ledger import ConfigMapLedger, LedgerStore
from slurm.health.metrics import Registry, serve
from slurm.health.repair import Policy
from slurm.health.slurm_access import CliSlurm, SlurmAccess


@dataclass
class Controller:
    """What the settings make: the repair policy, whether it acts, and the active checks."""

    policy: Policy
    act: bool  # repair.enabled: false only logs what it would replace
    checks: ActiveChecks
    pass_seconds: float

    @classmethod
    def from_settings(cls, settings: dict[str, Any], probe: Probe | None = None) -> Controller:
        active = settings["activeChecks"]
        checks = {name: PartitionCheck(c["kind"], int(c["ranks"]), c.get("floorGBps"))
                  for name, c in active["partitions"].items()}
        return cls(Policy(max_per_hour=int(settings["repair"]["maxPerHour"])), bool(settings["repair"]["enabled"]),
                   ActiveChecks(checks, float(active["intervalSeconds"]), float(active["relativeFloor"]),
                                int(active["maxNodesPerRound"]), probe or Probe(Path(active["outputDir"]))),
                   float(settings["passSeconds"]))

    def one_pass(self, slurm: SlurmAccess, kube: Kube, ledger: LedgerStore, metrics: Registry, now: float,
                 log: Log = log_json) -> None:
        repair_pass(slurm, kube, ledger, self.policy, metrics, now, dry_run=not self.act, log=log)
        self.checks.round(slurm, metrics, now, log)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m slurm.health")
    parser.add_argument("--settings", type=Path, required=True)
    settings = json.loads(parser.parse_args(argv).settings.read_text())
    controller = Controller.from_settings(settings)
    metrics = Registry()
    serve(metrics, port=int(settings["metricsPort"]))
    slurm, kube = CliSlurm(), Kube.in_cluster()
    ledger = ConfigMapLedger(kube, settings["ledgerConfigMap"], settings["namespace"])
    while True:
        controller.one_pass(slurm, kube, ledger, metrics, time.time())
        time.sleep(controller.pass_seconds)


if __name__ == "__main__":
    main()
