"""EC2 instance topology on the real local Slurm (25.11, built from source): the topology.conf generated from the
recorded DescribeInstanceTopology pages (tests/topology/data) makes slurmctld pack each multi-node job under
one leaf switch, where without it the same jobs span switches.

Only one slurmd can run on this host (slurm/local/dynamic.py), so the eight nodes are cloud nodes that never
boot: `State=CLOUD` with power saving (ResumeProgram=/bin/true, a long ResumeTimeout; power saving in
https://slurm.schedmd.com/power_save.html). slurmctld picks a job's nodes when it starts the job, then waits
for them to resume: the job sits in CONFIGURING with its node list chosen (seen here on 22.05.8 and 25.11.7,
within a second of sbatch). The jobs are cancelled before they could run. Instance k of the recorded pages hosts node
tnk; odd and even instances sit under different spines, so a topology-blind allocation of the first two free
nodes (tn1, tn2) crosses spines. The uncovered m5.xlarge instance hosts this machine's own node.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from slurm.agent.topology.render import render_topology_conf
from slurm.agent.topology.tree import UNPLACED, SwitchTree, build_tree
from slurm.local import ClusterStatus
from slurm.local.settings import with_settings
from slurm.local.topology import detect_node
from tests.topology import recorded

pytestmark = pytest.mark.slurm

PARTITION = "topo"
NODES = [f"tn{k}" for k in range(1, 9)]
CLOUD_NODES = [
    # https://slurm.schedmd.com/slurm.conf.html: SuspendProgram/ResumeProgram run on power down/up; a node
    # that has not registered within ResumeTimeout is set DOWN. SuspendTime enables power saving.
    "SuspendProgram=/bin/true",
    "ResumeProgram=/bin/true",
    "ResumeTimeout=600",
    "SuspendTimeout=30",
    "SuspendTime=600",
    "NodeName=tn[1-8] CPUs=1 State=CLOUD",
    f"PartitionName={PARTITION} Nodes=tn[1-8] MaxTime=INFINITE State=UP",
]
# https://slurm.schedmd.com/topology.conf.html: the tree plugin needs select/cons_tres (the local default).
TREE = "TopologyPlugin=topology/tree"
WAIT_S = 30.0


def _run(*argv: str) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, f"`{' '.join(argv)}` failed: {result.stderr or result.stdout}"
    return result.stdout


def _hostnames(expression: str) -> list[str]:
    return _run("scontrol", "show", "hostnames", expression).split()


def _node_list(job: str) -> list[str]:
    """The nodes slurmctld chose, once the job waits in CONFIGURING for them to power up."""
    deadline = time.monotonic() + WAIT_S
    seen = ""
    while time.monotonic() < deadline:
        seen = _run("squeue", "-h", "-j", job, "-o", "%T %N").strip()
        state, _, nodes = seen.partition(" ")
        if state == "CONFIGURING" and nodes:
            return _hostnames(nodes)
        time.sleep(0.5)
    raise AssertionError(f"job {job} got no nodes within {WAIT_S:.0f} s: {seen!r}")


def _two_jobs_of_two_nodes() -> list[set[str]]:
    jobs = [
        _run("sbatch", "--parsable", "-p", PARTITION, "-N2", "--output=/dev/null", "--wrap", "sleep 600").strip()
        for _ in range(2)
    ]
    try:
        return [set(_node_list(job)) for job in jobs]
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)
        # The nodes were powering up: power them down again at once, leaving nothing waiting on ResumeTimeout.
        subprocess.run(["scontrol", "update", "nodename=tn[1-8]", "state=power_down_force"], capture_output=True,
                       timeout=30)


def _tree(host: str) -> SwitchTree:
    mapping = {recorded.instance_id(k): [f"tn{k}"] for k in range(1, 9)}
    return build_tree(recorded.instances(), {**mapping, recorded.UNCOVERED: [host]})


def _shown_topology() -> dict[str, dict[str, str]]:
    """`scontrol show topology`: SwitchName -> its fields (Level, Nodes, Switches...)."""
    shown = {}
    for line in _run("scontrol", "show", "topology").splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "SwitchName" in fields:
            shown[fields.pop("SwitchName")] = fields
    return shown


@pytest.fixture(scope="module")
def tree(local_slurm: ClusterStatus) -> SwitchTree:
    return _tree(detect_node().name)


def test_the_tree_packs_each_job_under_one_leaf_switch(tree: SwitchTree) -> None:
    with with_settings([*CLOUD_NODES, TREE], topology_conf=render_topology_conf(tree)):
        shown = _shown_topology()
        allocations = _two_jobs_of_two_nodes()

    # topology/tree takes the best fit: the smallest leaf that holds the job. Leaves of the recorded pages:
    # {tn1,tn3,tn5}, {tn7}, {tn2,tn4}, {tn6,tn8}; two 2-node jobs fill the two 2-node leaves exactly.
    assert allocations == [{"tn2", "tn4"}, {"tn6", "tn8"}]
    leaves = {tree.leaf_of(node) for nodes in allocations for node in nodes}
    for nodes in allocations:
        assert len(nodes) == 2
        assert len({tree.leaf_of(node) for node in nodes}) == 1, f"{sorted(nodes)} span leaf switches"
    assert allocations[0].isdisjoint(allocations[1])
    assert len(leaves) == 2

    assert set(shown) == {switch.name for switch in tree.switches}
    for switch in tree.switches:
        if switch.nodes:
            assert shown[switch.name]["Level"] == "0", switch.name
            assert _hostnames(shown[switch.name]["Nodes"]) == list(switch.nodes), switch.name
        else:
            assert _hostnames(shown[switch.name]["Switches"]) == list(switch.switches), switch.name
    assert shown[tree.root]["Level"] == "3"  # leaf, middle layer, spine, root
    assert sorted(_hostnames(shown[tree.root]["Nodes"])) == sorted([*NODES, *tree.leaves()[UNPLACED]])


def test_without_the_tree_the_same_jobs_span_spines(tree: SwitchTree) -> None:
    """The control: topology-blind, slurmctld takes the first free nodes in order, across switches."""
    with with_settings(CLOUD_NODES):
        assert "SwitchName" not in _run("scontrol", "show", "topology")
        allocations = _two_jobs_of_two_nodes()

    assert allocations == [{"tn1", "tn2"}, {"tn3", "tn4"}]
    for nodes in allocations:
        assert len({tree.leaf_of(node) for node in nodes}) == 2
