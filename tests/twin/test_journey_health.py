"""The node health check on the twin's nodes, which carry the real images' tool set: it passes on every partition as
slurmd runs it, and the check before the fix (fi_info and neuron-ls, which Slinky's slurmd image lacks) fails there
naming the partition, the node, the check and the missing tool. And the kubelet's startup probe: a slurmd pod that
does not come up within the operator's 6 x 10 s is restarted."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from components.slinky.health_settings import NODE_CHECK
from scripts.twin.cluster import CONTAINER_PATH, Twin
from tests.twin.conftest import USERS
from tests.twin.researcher import START_BOUND_S, Job, Researcher, admin, cluster_story, wait_for

pytestmark = [pytest.mark.twin]

SCRIPT = Path(__file__).resolve().parents[2] / "slurm" / "node" / "node-check.sh"
# node-check.sh's EFA and Neuron checks before this fix: they asked libfabric's fi_info and the Neuron tools.
WITHOUT_THE_FIX = r'''
check_efa() {
  ((EFA > 0)) || return 0
  command -v fi_info >/dev/null 2>&1 || { fail efa "fi_info not found, expected $EFA EFA devices"; return; }
}
check_neuron() {
  ((NEURON_DEVICES > 0)) || return 0
  command -v neuron-ls >/dev/null 2>&1 ||
    { fail neuron "neuron-ls not found, expected $NEURON_DEVICES Neuron devices"; return; }
}
'''


def without_the_fix() -> str:
    """node-check.sh with its EFA and Neuron checks replaced by the tool-based ones, just before `case "$MODE"`."""
    text = SCRIPT.read_text()
    main = text.index('case "$MODE" in\n  check)')
    return text[:main] + WITHOUT_THE_FIX + text[main:]


def hold_a_node(twin: Twin, person: Researcher, partition: str) -> tuple[Job, str]:
    """A 1-node job that keeps one of the partition's nodes up (from zero, through the controllers)."""
    job = person.sbatch("--wrap=sleep 900", partition, f"--partition={partition}", "--nodes=1", "--time=20",
                        "--output=/dev/null", "--job-name=hold")
    _state, _reason, node = wait_for(twin, job, ("RUNNING",), START_BOUND_S)
    return job, node


def run_check(twin: Twin, node: str, script: str) -> tuple[int, str]:
    """`script check` in the node's slurmd container as slurmd runs HealthCheckProgram: root, an environment of
    SLURMD_NODENAME alone (slurmd.c run_script_health_check)."""
    pod = twin.pods[node].started
    result = pod.exec(["env", "-i", f"SLURMD_NODENAME={node}", "bash", script, "check"], env={"PATH": CONTAINER_PATH},
                      check=False, timeout=90)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.timeout(1800)
def test_the_health_check_passes_on_the_images_tool_set_and_the_old_one_names_what_is_missing(
        stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    for nodeset in twin.nodesets:
        partition = nodeset["metadata"]["name"]
        env = next(c for name, c in twin.objects["ConfigMap"].items() if name == f"slurm-eks-health-{partition}")
        wants = dict(re.findall(r"^(EFA|NEURON_DEVICES)=(\d+)", env["data"]["health.env"], re.MULTILINE))
        job, node = hold_a_node(twin, person, partition)
        try:
            code, out = run_check(twin, node, NODE_CHECK)
            assert code == 0, f"{stack}/{partition} node {node}: the shipped check fails on the image:\n{out}"
            if wants.get("EFA", "0") == "0" and wants.get("NEURON_DEVICES", "0") == "0":
                continue
            old = "/run/node-check-without-the-fix.sh"
            twin.pods[node].started.exec(["bash", "-c", f"cat > {old}"], env={"PATH": CONTAINER_PATH},
                                         input_text=without_the_fix())
            code, out = run_check(twin, node, old)
            story = cluster_story(twin)
            tool, check = ("fi_info", "efa") if wants.get("EFA", "0") != "0" else ("neuron-ls", "neuron")
            assert code == 1, f"{stack}/{partition} node {node}: the check without the fix passed:\n{out}"
            assert re.search(rf"partition {partition}\S* {node} \S+: slurm-eks: {check}: {tool} not found", story), (
                f"{stack}/{partition}: the drained node's story does not name the node, check and tool:{story}")
        finally:
            admin(twin, f"scancel {job.id}")
            admin(twin, f"scontrol update nodename={node} state=resume || true", timeout=30)


@pytest.mark.timeout(900)
def test_a_slurmd_that_does_not_start_within_the_probes_allowance_is_restarted(stack_twin: tuple[str, Twin]) -> None:
    """The node's pod made again with its processes stopped before its containers start: the startup probe fails 6
    times, 10 s apart, and the kubelet restarts it; the new one starts and the node is idle again."""
    stack, twin = stack_twin
    assert twin.controllers is not None
    person = Researcher(twin, USERS[stack], stack)
    partition = twin.nodesets[0]["metadata"]["name"]
    job, node = hold_a_node(twin, person, partition)
    admin(twin, f"scancel {job.id}")
    restarts = len(twin.kubelet.restarts)
    with twin.controllers.lock:  # the NodeSet controller waits while the pod goes and comes back frozen
        twin.pods[node].started.kill()
        pod = twin.restart_node(node).started
        os.killpg(pod.process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 180
    while len(twin.kubelet.restarts) == restarts and time.monotonic() < deadline:
        time.sleep(1)
    found = twin.kubelet.restarts[restarts:]
    assert found and found[0].pod == node and "startupProbe failed 6 times" in found[0].reason, (
        f"{stack}/{partition}: {node} was not restarted by its startup probe within 180 s ({found})")
    admin(twin, f"scontrol update nodename={node} state=resume || true", timeout=30)
    twin.wait_nodes([node], ("idle",), timeout_s=120)
