"""Offline plan: run the real Pulumi program under mocks and record what `pulumi up` would create.

No credentials and no network: every RegisterResource request is answered by `RealisticMocks` and kept
by `RecordingMonitor`. The program runs inside `pulumi.runtime.test`, which drains every registration
on one event loop (outside it, pulumi-eks components intermittently fail with "attached to a different
loop").
"""

from __future__ import annotations

import asyncio
import json
import logging
import runpy
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import settings
from pulumi.runtime.stack import run_in_stack
from pulumi.runtime.sync_await import _sync_await

from components.addons.k8s_operators import upstream_problems
from components.config.cluster import CONFIG_NAMESPACE
from components.config.problems import ConfigError
from components.config.stack_context import StackContext
from components.config.stackfile import PROJECT_ROOT, STACKS_DIR, cluster_value, read_pulumi_config, stack_file
from components.config.validation import parse_cluster_config
from components.findings import Finding
from scripts.offline import plan_cache
from scripts.offline.mocks import RealisticMocks, RecordingMonitor
from scripts.offline.plan_model import Plan
from scripts.offline.security_groups import node_security_groups

PROGRAM = PROJECT_ROOT / "__main__.py"
# The program's pulumi.log output (config warnings) is reported by the caller instead.
_QUIET = logging.getLogger("slurm-eks.plan.engine")
_QUIET.setLevel(logging.ERROR)


def run_plan(stack: str, stacks_dir: Path = STACKS_DIR) -> tuple[Plan, list[Finding]]:
    """Validate the stack's config, then run the program under mocks; raises ConfigError first (also for an
    upstream file the config needs that is not in its cache: `make upstream`). Returns the plan and the config's
    warnings."""
    path = stack_file(stack, stacks_dir)
    pulumi_config = read_pulumi_config(path)
    config, warnings = parse_cluster_config(cluster_value(pulumi_config, str(path)), str(path),
                                            StackContext(stack, stacks_dir))
    missing = upstream_problems(config)  # the plan reads upstream files from their cache only, never the network
    if missing:
        raise ConfigError(missing, str(path))
    entry = plan_cache.key(stack, path) if plan_cache.enabled() else None
    cached = plan_cache.load(entry) if entry else None
    if cached is not None:
        return cached, warnings
    plan_cache.planning(stack)
    mocks = RealisticMocks(region=config.region, cluster_name=config.name_for(stack))
    pulumi.runtime.set_all_config({k: _config_string(v) for k, v in pulumi_config.items()})
    plan = record(lambda: runpy.run_path(str(PROGRAM), run_name="__main__"), stack, mocks)
    plan.nodes = node_security_groups(plan)
    if entry:
        plan_cache.save(entry, plan)
    return plan, warnings


def _ensure_event_loop() -> None:
    """Pulumi's SDK makes its futures on the thread's current event loop (asyncio.get_event_loop, as `pulumi up`'s
    language host sets one up). An asyncio.run() earlier in this process (a CLI command, a test) ends by setting
    none, and a loop may have been closed: then set a new one, or the first registration fails with "There is no
    current event loop"."""
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        loop = None
    if loop is None or loop.is_closed():
        asyncio.set_event_loop(asyncio.new_event_loop())


def record(program: Callable[[], None], stack: str, mocks: RealisticMocks) -> Plan:
    """What `program` registers under `mocks`, as a plan (the whole program, or one component in a test)."""
    _ensure_event_loop()
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=CONFIG_NAMESPACE, stack=stack, preview=False, monitor=monitor,
                             logger=_QUIET)
    # As `pulumi up` does: inside a Stack resource (so exports are recorded), on one event loop that
    # drains every outstanding registration before returning.
    settings.ROOT.set(None)  # a previous plan in this process leaves its Stack as the root
    _sync_await(run_in_stack(program))
    return Plan(stack=stack, project=CONFIG_NAMESPACE, resources=sorted(monitor.recorded, key=lambda r: r.urn),
                outputs=monitor.stack_outputs, modelled=mocks.modelled)


def _config_string(value: Any) -> str:
    # Pulumi hands structured config to programs as JSON text.
    return value if isinstance(value, str) else json.dumps(value)


def write_plan(plan: Plan, out: Path) -> None:
    """`out/plan.json` plus `out/manifests/`, one YAML document per Kubernetes object. An interruption (Ctrl-C, a
    full disk) leaves the previous plan or none, never a plan.json beside another plan's manifests: everything is
    written into a staging directory inside `out` first, then plan.json goes, the manifests are swapped in, and the
    new plan.json comes last (`diff` reads plan.json: no plan.json, no plan)."""
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".plan-", dir=out))
    try:
        staged = stage / "manifests"
        staged.mkdir()
        for doc in plan.manifests():
            (staged / manifest_filename(doc)).write_text(yaml.safe_dump(_kubectl_order(doc), sort_keys=False))
        (stage / "plan.json").write_text(plan.to_json())
        (out / "plan.json").unlink(missing_ok=True)  # from here to the last rename there is no plan
        if (out / "manifests").exists():
            (out / "manifests").rename(stage / "previous-manifests")
        staged.rename(out / "manifests")
        (stage / "plan.json").rename(out / "plan.json")
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _kubectl_order(doc: dict[str, Any]) -> dict[str, Any]:
    """apiVersion, kind, metadata first, then the rest; keys sorted below that, as `kubectl get -o yaml`."""
    head = ("apiVersion", "kind", "metadata")
    ordered = {k: doc[k] for k in head if k in doc} | {k: doc[k] for k in sorted(doc) if k not in head}
    return {k: _sorted(v) for k, v in ordered.items()}


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def manifest_filename(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    parts = [doc["kind"], meta.get("namespace") or "cluster", meta.get("name", "unnamed")]
    return "_".join(p.lower() for p in parts) + ".yaml"
