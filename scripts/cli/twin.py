"""`slurm-eks local up|down|login --stack S`: the twin of a stack's cluster on this machine (scripts/twin), for
trying its partitions, accounts and job scripts before `pulumi up`."""

from __future__ import annotations

import os
import time
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


def up(stack: str, nodes: int | None, console: Console) -> Twin:
    """Start the twin; without `nodes`, from zero nodes, with the cluster's controllers in the foreground."""
    if os.geteuid() != 0:
        raise TwinError("the twin starts pods in network namespaces and mounts their file systems: run as root")
    size = f"{nodes} nodes per partition" if nodes else "no nodes: they come for jobs"
    console.print(f"planning stack {stack} offline, then starting its twin ({size})...")
    plan, _ = run_plan(stack)
    STATE_ROOT.mkdir(mode=0o755, parents=True, exist_ok=True)
    twin = Twin(plan, state_dir(stack), nodes_per_nodeset=nodes)
    twin.up()
    table = Table("POD", "KIND", "ADDRESS", "LOGS", title=f"twin of stack {stack} in {twin.state}")
    for name, pod in twin.pods.items():
        table.add_row(name, pod.kind, str(twin.network.links[name].address), str(twin.state / "pods" / name / "logs"))
    console.print(table)
    console.print(f"log in as a declared person: slurm-eks local login --stack {stack} --user <name>")
    if twin.controllers is not None:
        follow(twin, console)
    return twin


def follow(twin: Twin, console: Console, poll_s: float = 1.0) -> None:
    """Print each scaling step (scripts/twin/scaling.py) until Ctrl-C, which stops the controllers; the pods run
    on as they are until `slurm-eks local down`."""
    assert twin.controllers is not None
    console.print("KEDA, the HPA, the NodeSet controller and Karpenter run here: Ctrl-C stops them")
    shown = 0
    try:
        while True:
            events = twin.controllers.events
            for event in events[shown:]:
                console.print(f"{event.nodeset}: {event.what} {event.detail}", highlight=False)
            shown = len(events)
            time.sleep(poll_s)
    except KeyboardInterrupt:
        twin.stop_platform()
        console.print("controllers stopped; the pods run on as they are (`slurm-eks local down` stops them)")


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
