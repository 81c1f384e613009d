"""The node checks on the real local Slurm: slurmd runs slurm/node/node-check.sh as HealthCheckProgram,
Prolog and Epilog with the prod stack's settings, on a dynamic node of its gpu-h100 NodeSet (8 GPUs) that joins
the way a NodeSet pod does.

What is real: slurmctld and slurmd (25.11, the version the cluster runs, built from source), the script, the
slurm.conf lines our Controller writes (HealthCheckNodeState, PrologFlags=Alloc,Contain, nohold_on_prolog_fail), the
node's expectations (the env file the prod stack renders for gpu-h100), `scontrol update ... state=drain` and
Slurm's requeue. What stands in: nvidia-smi (tests/health/fakes/nvidia-smi, told how many GPUs to report) and
dmesg (empty); no FSx or EFA here, so no /shared or efa check (tests/health/test_node_check.py has those).
slurmd runs the programs with its own environment (SLURMD_NODENAME, and for the prolog and epilog
SLURM_SCRIPT_CONTEXT): a wrapper adds where the stand-ins, the env file and this Slurm's commands are (the
script's own PATH has the image's /usr/bin, where Slinky's packages put scontrol and squeue; the local build is
elsewhere), then runs the real script. Local deviations: the wrapper's absolute path for Prolog/Epilog (the
cluster lists them by file name and configless slurmctld ships them; the local slurmd reads local files), a 5 s
HealthCheckInterval, and the local scheduler pass every 2 s beside our nohold_on_prolog_fail.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from components.slinky.health_settings import health_slurm_conf, node_health_env
from slurm import client
from slurm.agent import contract as m
from slurm.agent.health.active_runner import ActiveChecks, PartitionCheck, Probe
from slurm.agent.health.controller import repair_pass
from slurm.agent.health.ledger import ConfigMapLedger
from slurm.agent.health.reasons import parse_reason
from slurm.agent.health.repair import Policy
from slurm.agent.health.slurm_access import CliSlurm
from slurm.agent.metrics import Registry
from slurm.cli_backend import run
from slurm.local import ClusterStatus
from slurm.local.dynamic import DynamicCluster, dynamic_nodes
from slurm.local.node import NodeState, node_state
from slurm.local.process import program
from tests.config.helpers import raw_config
from tests.health.kube_api import ApiServer
from tests.health.kube_api import nodeclaim as fake_nodeclaim
from tests.health.kube_api import pod as fake_pod
from tests.integration.slinky_nodes import BACKEND, PERSON, TIMEOUT_S, NodeSet, as_person, empty_partition, replaced

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "slurm" / "node" / "node-check.sh"
FAKES = REPO / "tests" / "health" / "fakes"
STAND_IN = REPO / "tests" / "health" / "stand_ins" / "all_reduce_perf"
INTERVAL_S = 5
# The Slurm commands the script runs (scontrol, squeue): the ones the tests run (tests/conftest.py PATH).
SLURM_BIN = Path(program("scontrol")).parent


@dataclass(frozen=True)
class Checks:
    """Where the wrapper finds the stand-ins' settings; `gpus(n)` sets what nvidia-smi reports from now on,
    `gpus(n, "prolog_slurmd")` only to the prolog."""

    root: Path
    wrapper: Path
    job_map: Path

    def gpus(self, count: int, context: str = "check") -> None:
        (self.root / f"gpus.{context}").write_text(str(count))

    def reset(self, count: int) -> None:
        for stale in [*self.root.glob("gpus.*"), *self.root.glob("calls.*")]:
            stale.unlink()
        self.gpus(count)

    def calls(self, context: str = "check") -> list[str]:
        log = self.root / f"calls.{context}"
        return log.read_text().splitlines() if log.exists() else []


def wrapper_text(root: Path) -> str:
    return f"""#!/bin/bash
# slurmd's environment plus where the stand-ins, the env file and Slurm's commands are; then the real script.
ctx="${{SLURM_SCRIPT_CONTEXT:-check}}"
export SLURM_EKS_HEALTH_ENV={root}/health.env SLURM_EKS_HEALTH_PATH={root}/bin:{SLURM_BIN}
export FAKE_CALL_LOG={root}/calls.$ctx
FAKE_GPUS="$(cat {root}/gpus.$ctx 2>/dev/null || cat {root}/gpus.check)"
export FAKE_GPUS
exec {SCRIPT} "$@"
"""


@pytest.fixture(scope="module")
def config() -> ClusterConfig:
    """prod: its gpu-h100 NodeSet has 8 GPUs (so the stand-in reports 7), and its Controller enforces associations
    and fair share, as a real cluster's does."""
    return parse_cluster_config(raw_config("prod"), "prod")[0]


@pytest.fixture(scope="module")
def checks(config: ClusterConfig, nodeset: NodeSet) -> Iterator[Checks]:
    root = Path(tempfile.mkdtemp(prefix="node-health-"))
    root.chmod(0o755)
    (root / "bin").mkdir()
    for tool in ("nvidia-smi", "dmesg", "_calllog.sh"):
        (root / "bin" / tool).symlink_to(FAKES / tool)
    env = node_health_env(config.partitions[nodeset.name], config)
    assert f"GPUS={nodeset.gpus}\n" in env  # the expectation comes from the stack, not from this test
    # No FSx and no EFA on this machine; /tmp for the disk check; the job map where the test can read it.
    local = {"SHARED_MOUNT": "", "EFA": "0", "DISK_PATHS": "/tmp", "MIN_FREE_MB": "1",
             "JOB_MAP_DIR": str(root / "job-map")}
    lines = [line for line in env.splitlines() if line.split("=", 1)[0] not in local]
    (root / "health.env").write_text("\n".join([*lines, *(f"{k}={v}" for k, v in local.items())]) + "\n")
    wrapper = root / "node-check-local.sh"
    wrapper.write_text(wrapper_text(root))
    wrapper.chmod(0o755)
    yield Checks(root, wrapper, root / "job-map")
    shutil.rmtree(root)


@pytest.fixture(scope="module")
def dynamic_cluster(local_slurm: ClusterStatus, config: ClusterConfig, nodeset: NodeSet,
                    checks: Checks) -> Iterator[DynamicCluster]:
    ours = health_slurm_conf(config)
    assert ours["SchedulerParameters"] == "nohold_on_prolog_fail"
    conf = replaced(nodeset.slurm_conf, {
        "HealthCheckProgram": str(checks.wrapper), "HealthCheckInterval": str(INTERVAL_S),
        "SchedulerParameters": f"sched_interval=2,{ours['SchedulerParameters']}",
        "Prolog": str(checks.wrapper), "Epilog": str(checks.wrapper)})
    assert "PrologFlags=Alloc,Contain" in conf and "HealthCheckNodeState=ANY,CYCLE" in conf
    with as_person(), dynamic_nodes(conf, nodeset.gpus) as cluster:
        yield cluster


@pytest.fixture
def cluster(dynamic_cluster: DynamicCluster, nodeset: NodeSet, checks: Checks) -> Iterator[DynamicCluster]:
    """Each test starts with healthy stand-ins and ends with no jobs and no nodes in the partition."""
    checks.reset(nodeset.gpus)
    yield dynamic_cluster
    empty_partition(dynamic_cluster, nodeset)


def wait(what: str, found: Callable[[], object], timeout_s: float = TIMEOUT_S) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def drained(name: str) -> NodeState | None:
    state = node_state(name)
    return state if state is not None and "DRAIN" in state.state else None


def reason_text(state: NodeState) -> tuple[str, str]:
    """`scontrol show node -o` gives `Reason=<text> [<user>@<time>]`: the text and who set it."""
    assert state.reason is not None, state
    text, _, who = state.reason.rpartition(" [")
    return text, who.split("@", 1)[0]


def submit(workdir: Path, nodeset: NodeSet, name: str, body: str = "") -> int:
    script = workdir / f"{name}.sbatch"
    script.write_text(f"#!/bin/bash\nset -eu\n{body}echo \"node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES\"\n")
    options = client.SubmitOptions(partition=nodeset.name, nodes=1, gpus_per_node=nodeset.gpus, time="5",
                                   job_name=name, output=str(workdir / "%x-%j.out"),
                                   extra_args=(f"--chdir={workdir}", "--requeue"))
    return client.submit(script, options, BACKEND)


def test_a_passing_check_leaves_the_node_alone(cluster: DynamicCluster, nodeset: NodeSet, checks: Checks) -> None:
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    # slurmd ran the check when it started and again each interval: three runs, all with every GPU there.
    wait("three runs of the check", lambda: len([c for c in checks.calls() if c.startswith("nvidia-smi")]) >= 3,
         timeout_s=6 * INTERVAL_S)
    state = node_state(pod)
    assert state is not None and state.usable and state.reason is None, state


def test_a_missing_gpu_drains_the_node_with_the_reason(cluster: DynamicCluster, nodeset: NodeSet,
                                                       checks: Checks) -> None:
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    checks.gpus(nodeset.gpus - 1)  # one GPU fell off the bus
    state = wait(f"{pod} drained", lambda: drained(pod), timeout_s=4 * INTERVAL_S)
    assert isinstance(state, NodeState)
    text, who = reason_text(state)
    parsed = parse_reason(text)
    assert parsed is not None and parsed.check == "gpu-count", text
    assert f"{nodeset.gpus - 1}" in parsed.detail and f"{nodeset.gpus}" in parsed.detail, text
    assert who == "root"  # slurmd runs the check as root
    # Healthy again: the node stays drained (a flapping GPU must not take jobs); the repair controller acts.
    checks.gpus(nodeset.gpus)
    ran = len(checks.calls())
    wait("another run of the check", lambda: len(checks.calls()) > ran, timeout_s=4 * INTERVAL_S)
    assert drained(pod) is not None


def test_a_failing_prolog_drains_and_requeues_the_job_without_a_hold(
    cluster: DynamicCluster, nodeset: NodeSet, checks: Checks, workdir: Path
) -> None:
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    checks.gpus(nodeset.gpus - 1, "prolog_slurmd")  # only the prolog sees the GPU missing
    job_id = submit(workdir, nodeset, "prolog-fails")
    state = wait(f"{pod} drained by the prolog", lambda: drained(pod))
    assert isinstance(state, NodeState)
    text, _ = reason_text(state)
    print(f"reason after a failing prolog: {text!r}")
    assert parse_reason(text) is not None and parse_reason(text).check == "gpu-count", text  # type: ignore[union-attr]
    job = client.wait_for(job_id, lambda j: j.restart_count >= 1 and j.state == "PENDING", TIMEOUT_S,
                          backend=BACKEND)
    assert job.reason not in ("JobHeldAdmin", "JobHeldUser"), job  # nohold_on_prolog_fail

    # What the repair controller has Karpenter do: the pod goes, a new one (healthy node) joins.
    cluster.leave(pod)
    checks.reset(nodeset.gpus)
    cluster.join(pod, nodeset.slurmd_conf)
    done = client.wait_for(job_id, timeout_s=TIMEOUT_S, backend=BACKEND)
    assert (done.state, done.exit_code, done.restart_count) == ("COMPLETED", 0, 1), done


def test_prolog_and_epilog_keep_dcgm_exporters_job_mapping(cluster: DynamicCluster, nodeset: NodeSet,
                                                           checks: Checks, workdir: Path) -> None:
    """dcgm-exporter reads <dir>/<gpu index> files holding job ids (NVIDIA/dcgm-exporter 4.5.3
    internal/pkg/transformation/hpc.go): the prolog writes them from SLURM_JOB_GPUS, the epilog removes them."""
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    started, release = workdir / "started", workdir / "release"
    job_id = submit(workdir, nodeset, "mapped", body=f"touch {started}\nuntil [ -e {release} ]; do sleep 0.2; done\n")
    # The batch script starts once the prolog is done (squeue may say RUNNING while the prolog still runs).
    wait("the job's script started", started.exists)
    mapped = {path.name: path.read_text().split() for path in checks.job_map.glob("[0-9]*")}
    assert mapped == {str(gpu): [str(job_id)] for gpu in range(nodeset.gpus)}
    release.touch()
    assert client.wait_for(job_id, timeout_s=TIMEOUT_S, backend=BACKEND).state == "COMPLETED"
    wait("the epilog removed the mapping", lambda: not list(checks.job_map.glob("[0-9]*")))
    assert run(["sinfo", "-h", "-n", pod, "-o", "%T"]).strip() == "idle"


class PersonsCli(CliSlurm):
    """The controller's CLI access, submitting its probes as PERSON: in the cluster it runs as `slurm`
    (components/lifecycle/node_repair.py), here root runs it and the Controller's DisableRootJobs=YES refuses root."""

    def _run(self, argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        if argv[0] == "sbatch":
            argv = ["runuser", "-u", PERSON, "--", *argv]
        return super()._run(argv, stdin)


@dataclass
class Controller:
    """The repair controller's pieces against the real Slurm and a fake Kubernetes API that knows the pod, its
    node and that node's NodeClaim (tests/health/kube_api.py ApiServer: shaped by the Karpenter CRD), reached
    through the official kubernetes client."""

    kube: ApiServer
    slurm: CliSlurm
    metrics: Registry
    logs: list[dict[str, object]]

    def repair(self, node: str) -> tuple[str, str]:
        """One pass; what it decided for `node` (the host's own node is in the list too, never drained)."""
        kube = self.kube.client()
        decisions = repair_pass(self.slurm, kube, ConfigMapLedger(kube), Policy(max_per_hour=2), self.metrics,
                                time.time(), log=self.logs.append)
        assert all(d.kind == "ignore" for d in decisions if d.node != node), decisions
        return next((d.kind, d.why) for d in decisions if d.node == node)


@pytest.fixture
def controller(nodeset: NodeSet) -> Iterator[Controller]:
    fake = ApiServer()
    pod = nodeset.pod(0)
    fake.pods[pod] = fake_pod(pod, "ip-10-0-1-20.ec2.internal", nodeset.name)
    fake.nodeclaims[f"{nodeset.name}-abcde"] = fake_nodeclaim(f"{nodeset.name}-abcde", "ip-10-0-1-20.ec2.internal",
                                                              nodeset.name)
    yield Controller(fake, PersonsCli(), Registry(), [])
    fake.close()


def test_the_repair_controller_waits_for_jobs_then_replaces_and_leaves_a_persons_drain(
    cluster: DynamicCluster, nodeset: NodeSet, checks: Checks, workdir: Path, controller: Controller
) -> None:
    """Its decisions from the real `scontrol show nodes --json` of Slurm 25.11."""
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    release = workdir / "release"
    job_id = submit(workdir, nodeset, "running", body=f"until [ -e {release} ]; do sleep 0.2; done\n")
    client.wait_for(job_id, lambda j: j.state == "RUNNING", TIMEOUT_S, backend=BACKEND)
    checks.gpus(nodeset.gpus - 1)
    wait(f"{pod} draining", lambda: drained(pod))
    assert controller.repair(pod) == ("wait", "jobs-running")
    assert controller.kube.deletes() == []

    release.touch()
    assert client.wait_for(job_id, timeout_s=TIMEOUT_S, backend=BACKEND).state == "COMPLETED"
    wait("the job's CPUs given back", lambda: run(["sinfo", "-h", "-n", pod, "-o", "%T"]).strip() == "drained")
    assert controller.repair(pod) == ("replace", "drained")
    assert controller.kube.deletes() == [f"/apis/karpenter.sh/v1/nodeclaims/{nodeset.name}-abcde"]
    assert controller.metrics.value(m.REPLACEMENTS, {"partition": nodeset.name, "check": "gpu-count"}) == 1

    # A person's drain: never replaced, however long it stays.
    checks.gpus(nodeset.gpus)
    run(["scontrol", "update", f"nodename={pod}", "state=resume"])
    run(["scontrol", "update", f"nodename={pod}", "state=drain", "reason=fan noisy, RMA ticket 4711"])
    assert controller.repair(pod) == ("ignore", "person")
    assert len(controller.kube.deletes()) == 1
    assert controller.metrics.value(m.NODES_DRAINED_BY_PERSON, {"partition": nodeset.name}) == 1


def test_an_active_check_below_the_floor_drains_with_the_number_and_the_node_is_replaced(
    cluster: DynamicCluster, nodeset: NodeSet, workdir: Path, controller: Controller,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe is a real Slurm job on the idle node running the all_reduce_perf stand-in (nccl-tests' output
    format, tests/health/stand_ins/); 2 ranks because the local node has 2 CPUs."""
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    probe = Probe(workdir, nccl_image=None, nccl_binary=str(STAND_IN), mpi="none")
    checks = ActiveChecks({nodeset.name: PartitionCheck("nccl", 2, floor_gbps=300.0)}, interval_s=3600,
                          fraction=0.8, per_round=1, probe=probe)

    def one_round() -> None:
        checks.round(controller.slurm, controller.metrics, time.time(), controller.logs.append)

    def probe_done() -> bool:
        one_round()
        return not checks.running

    monkeypatch.setenv("STAND_IN_BUSBW", "480.5")
    one_round()  # submits the probe
    assert list(checks.running.values()) == [(nodeset.name, pod)]
    wait("the healthy probe judged", probe_done)
    assert [log for log in controller.logs if log["event"] == "error"] == []
    labels = {"partition": nodeset.name, "node": pod, "check": "nccl"}
    assert controller.metrics.value(m.BUS_BANDWIDTH, labels) == 480.5
    assert drained(pod) is None

    monkeypatch.setenv("STAND_IN_BUSBW", "120.25")
    checks.last_probed.clear()  # due again
    one_round()
    assert list(checks.running.values()) == [(nodeset.name, pod)]
    wait("the slow probe judged", probe_done)
    assert controller.metrics.value(m.BUS_BANDWIDTH, labels) == 120.25
    state = drained(pod)
    assert state is not None, node_state(pod)
    text, _ = reason_text(state)
    assert text.startswith("slurm-eks: nccl: bus bandwidth 120.2 GB/s below 300.0 GB/s"), text
    wait("the probe's CPUs given back", lambda: run(["sinfo", "-h", "-n", pod, "-o", "%T"]).strip() == "drained")
    assert controller.repair(pod) == ("replace", "drained")
