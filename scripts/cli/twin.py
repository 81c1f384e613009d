"""`slurm-eks local up|down|login --stack S`: the twin of a stack's cluster on this machine (scripts/twin), for
trying its partitions, accounts and job scripts before `pulumi up`."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from scripts.offline.plan import run_plan
from scripts.twin.cluster import Twin, enter_argv, stop_pods
from scripts.twin.errors import TwinError

STATE_ROOT = Path(os.environ.get("SLURM_EKS_TWIN_STATE", "/var/tmp/slurm-eks"))
LOGIN_PATH = "/usr/local/bin:/usr/bin:/bin"


def state_dir(stack: str) -> Path:
    """Where a stack's twin keeps its pods, volumes and logs (others than root must enter it: not /root)."""
    return STATE_ROOT / f"twin-{stack}"


def up(stack: str, nodes: int, console: Console) -> Twin:
    if os.geteuid() != 0:
        raise TwinError("the twin starts pods in network namespaces and mounts their file systems: run as root")
    console.print(f"planning stack {stack} offline, then starting its twin ({nodes} nodes per partition)...")
    plan, _ = run_plan(stack)
    STATE_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
    twin = Twin(plan, state_dir(stack), nodes_per_nodeset=nodes)
    twin.up()
    table = Table("POD", "KIND", "ADDRESS", "LOGS", title=f"twin of stack {stack} in {twin.state}")
    for name, pod in twin.pods.items():
        table.add_row(name, pod.kind, str(twin.network.links[name].address), str(twin.state / "pods" / name / "logs"))
    console.print(table)
    console.print(f"log in as a declared person: slurm-eks local login --stack {stack} --user <name>")
    return twin


def down(stack: str) -> list[str]:
    state = state_dir(stack)
    if not state.exists():
        return []
    stopped = stop_pods(state)
    plan, _ = run_plan(stack)
    Twin(plan, state).network.teardown()
    return stopped


def login_argv(stack: str, user: str | None) -> list[str]:
    """nsenter into the twin's login pod: a login shell as `user` (root when None)."""
    home = f"/shared/home/{user}" if user else "/root"
    env = {"PATH": LOGIN_PATH, "HOME": home, "USER": user or "root", "TERM": os.environ.get("TERM", "xterm")}
    return enter_argv(state_dir(stack), "login", ["bash", "-l"], user=user, env=env)
