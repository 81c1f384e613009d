"""`python3 -m slurm.health --settings settings.json`: the repair controller's loop (components/node_repair.py
renders the settings and runs this in the cluster). Each pass: repair (controller.repair_pass), then the active
checks' round (active_runner), then sleep. Metrics on /metrics the whole time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurm.health.active_runner import ActiveChecks, PartitionCheck, Probe
from slurm.health.controller import log_json, repair_pass
from slurm.health.kube import Kube
from slurm.health.ledger import ConfigMapLedger
from slurm.health.metrics import Registry, serve
from slurm.health.repair import Policy
from slurm.health.slurm_access import CliSlurm


def active_checks(settings: dict[str, Any], probe: Probe) -> ActiveChecks:
    active = settings["activeChecks"]
    checks = {name: PartitionCheck(c["kind"], int(c["ranks"]), c.get("floorGBps"))
              for name, c in active["partitions"].items()}
    return ActiveChecks(checks, float(active["intervalSeconds"]), float(active["relativeFloor"]),
                        int(active["maxNodesPerRound"]), probe)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python3 -m slurm.health")
    parser.add_argument("--settings", type=Path, required=True)
    args = parser.parse_args(argv)
    settings = json.loads(args.settings.read_text())
    metrics = Registry()
    serve(metrics, port=int(settings["metricsPort"]))
    slurm, kube = CliSlurm(), Kube.in_cluster()
    ledger = ConfigMapLedger(kube, settings["ledgerConfigMap"], settings["namespace"])
    repair = settings["repair"]
    policy = Policy(max_per_hour=int(repair["maxPerHour"]))
    checks = active_checks(settings, Probe(Path(settings["activeChecks"]["outputDir"])))
    while True:
        now = time.time()
        # With repair off, the controller says what it would replace and replaces nothing.
        repair_pass(slurm, kube, ledger, policy, metrics, now, dry_run=not repair["enabled"])
        checks.round(slurm, metrics, now, log_json)
        time.sleep(float(settings["passSeconds"]))


if __name__ == "__main__":
    main()
