"""Scale from zero, on the real local Slurm: what the autoscaling story rests on.

KEDA scales a partition's NodeSet up from zero on Slurm's count of pending jobs, so Slurm must (a) keep a
`--gpus-per-node` job pending, not reject it, in a partition with no nodes yet; (b) run it once a NodeSet
pod's `slurmd -Z` registers with the NodeSet's feature and GRES; (c) lose no job when the operator scales in:
drain the node, wait until it is drained, delete the pod (slurmd stops), delete the node record.

The slurm.conf lines and the slurmd `--conf` come from our code (the dev stack's Controller and NodeSet
specs) put together the way SlinkyProject/slurm-operator v1.2.1 does: `NodeSet=<n> Feature=<n>`, then
`PartitionName=<n> Nodes=<n> <partition.config>` (internal/builder/controllerbuilder/controller_config.go,
`buildNodeSetConf`), then the Controller's `extraConf` (but for its cgroup plugins: this machine has no
cgroups, see MACHINE_SETTINGS in slurm/local/config.py); `--conf` merges the NodeSet's name into our
`Features=` (internal/builder/workerbuilder/worker_app.go, `slurmdConfArgs`). Scale-in follows
internal/controller/nodeset/nodeset_sync.go (`processCondemned`: drain, delete the pod only once drained),
the pod's preStop (`scontrol update state=down`, worker_app.go) and `DeleteNode`
(internal/controller/nodeset/slurmcontrol/slurmcontrol.go; the operator calls it when it prunes node records).

Slurm here is 25.11, the version the cluster runs, built from source (slurm/local/installation.py). What these
tests use, checked in SchedMD/slurm at tag slurm-25-11-7-1: `NodeSet=` lines (src/common/read_config.c
`_parse_nodeset`), `slurmd -Z --conf` and `scontrol delete nodename=` (doc/html/dynamic_nodes.shtml), and the
queueing rule: a job asking for more nodes or CPUs than its partition has is rejected only when
EnforcePartLimits is set (src/slurmctld/job_mgr.c `_valid_job_part` after `_part_access_check`: "Enforce Part
Limit = no"). Neither our Controller nor the operator sets it. Jobs are submitted as a Linux user of the tests'
own, not `nobody` (tests/integration/slinky_nodes.py says why). Not shown here:
- the metric KEDA reads, `slurm_partition_jobs_pending` (MetricsType=metrics/openmetrics, new in 25.11:
  src/plugins/metrics/openmetrics/openmetrics.c). It counts the partition's jobs in PENDING state
  (src/slurmctld/statistics.c `_statistics_part_aggregate_job`), the count asserted here from squeue.
- several slurmds on one host: the NodeSet's `--conf` names no `Port=` (on EKS each pod has its own address),
  so one dynamic node at a time takes over this host's slurmd port (slurm/local/dynamic.py).
- configless slurmd (`--conf-server`, how the pods get slurm.conf and gres.conf) and `AutoDetect=nvidia`:
  here slurmd reads the local files, and the GPUs are /dev/null symlinks named in gres.conf.
- `Topology=` in `--conf`, which Slinky's image adds from the pod's topology annotation (node lines accept it
  from 25.05 on); tests/integration/test_topology.py runs the topology. Like Slinky, nothing here sets TreeWidth.
- jobs fenced by cgroups (the Controller's task/cgroup, proctrack/cgroup): no cgroups on this machine.
- the node checks (HealthCheckProgram, Prolog, Epilog): tests/integration/test_node_health.py runs them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.config.cluster import ClusterConfig
from scripts.twin.scaling import DRAIN_REASON as TWIN_DRAIN_REASON
from slurm import client
from slurm.backend import JobClientError
from slurm.cli_backend import CliBackend, run
from slurm.jobinfo import JobInfo
from slurm.local import ClusterStatus
from slurm.local.dynamic import DynamicCluster, dynamic_nodes
from slurm.local.node import node_state
from tests.integration.slinky_nodes import BACKEND, TIMEOUT_S, NodeSet, as_person, empty_partition, without_node_checks

pytestmark = pytest.mark.slurm
# The operator's reasons (slurmcontrol.go FormatNodeReason; nodeset_sync.go processCondemned; worker_app.go).
DRAIN_REASON = TWIN_DRAIN_REASON.format(namespace="slurm", pod="{pod}")  # the twin's NodeSet controller's too
PRESTOP_REASON = "slurm-operator: Pod is terminating"


@pytest.fixture(scope="module")
def dynamic_cluster(local_slurm: ClusterStatus, nodeset: NodeSet, config: ClusterConfig) -> Iterator[DynamicCluster]:
    with as_person(), dynamic_nodes(without_node_checks(nodeset, config), nodeset.gpus) as cluster:
        yield cluster


@pytest.fixture
def cluster(dynamic_cluster: DynamicCluster, nodeset: NodeSet) -> Iterator[DynamicCluster]:
    """Each test starts, and leaves, the NodeSet's partition without nodes and without jobs."""
    yield dynamic_cluster
    empty_partition(dynamic_cluster, nodeset)


def submit(workdir: Path, nodeset: NodeSet, name: str, wait_for: Path | None = None) -> int:
    """A whole-node GPU job of the NodeSet's partition that prints what it got (after `wait_for` exists)."""
    script = workdir / f"{name}.sbatch"
    hold = f"until [ -e {wait_for} ]; do sleep 0.2; done\n" if wait_for else ""
    script.write_text(f'#!/bin/bash\nset -eu\n{hold}echo "gpus=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME"\n')
    options = client.SubmitOptions(partition=nodeset.name, nodes=1, gpus_per_node=nodeset.gpus, time="5",
                                   job_name=name, output=str(workdir / "%x-%j.out"),
                                   extra_args=(f"--chdir={workdir}",))
    return client.submit(script, options, BACKEND)


def scontrol_field(entity: str, name: str | int, field: str) -> str:
    """A one-word field of `scontrol show <entity> <name>`: a state, a count, a time (slurmctld's clock, whole
    seconds, sortable as text)."""
    found = re.search(rf"\b{field}=(\S+)", run(["scontrol", "show", entity, "-o", str(name)]))
    assert found, f"{entity} {name} has no {field}"
    return found.group(1)


def pending_after_a_scheduler_pass(job_id: int, after: str) -> JobInfo:
    """The job once slurmctld's scheduler has looked at it later than `after`: pending then means it stays."""
    client.wait_for(
        job_id, lambda _: scontrol_field("job", job_id, "LastSchedEval") > after, TIMEOUT_S, backend=BACKEND
    )
    return client.status(job_id, BACKEND)


def pending_in(partition: str) -> list[int]:
    """The partition's PENDING jobs: what `slurm_partition_jobs_pending` counts on Slurm 25.11."""
    return [j.job_id for j in client.list_jobs(BACKEND) if j.partition == partition and j.state == "PENDING"]


def partition_nodes(partition: str) -> list[str]:
    return run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N"]).split()


def gpus_seen(nodeset: NodeSet, pod: str) -> str:
    return f"gpus={','.join(str(i) for i in range(nodeset.gpus))} node={pod}\n"


def test_empty_partition_queues_a_gpu_job_until_a_nodeset_pod_joins(
    cluster: DynamicCluster, nodeset: NodeSet, workdir: Path
) -> None:
    assert partition_nodes(nodeset.name) == []
    job_id = submit(workdir, nodeset, "from-zero")  # (a) accepted: EnforcePartLimits=ALL rejects it here
    # Placed at submission and kept: the partition cannot hold it yet (the scheduler passes over such jobs,
    # so (b) is what shows it stayed queued).
    job = client.wait_for(job_id, lambda j: j.reason is not None, TIMEOUT_S, backend=BACKEND)
    assert (job.state, job.reason) == ("PENDING", "PartitionConfig"), job
    assert pending_in(nodeset.name) == [job_id]

    pod = nodeset.pod(0)
    joined_at = time.monotonic()
    cluster.join(pod, nodeset.slurmd_conf)  # (b)
    assert partition_nodes(nodeset.name) == [pod]  # placed there by its NodeSet feature
    assert nodeset.name in scontrol_field("node", pod, "AvailableFeatures").split(",")
    assert scontrol_field("node", pod, "Gres") == f"gpu:{nodeset.gpus}"
    done = client.wait_for(job_id, timeout_s=TIMEOUT_S, backend=BACKEND)
    print(f"pod joined -> job done: {time.monotonic() - joined_at:.2f} s")
    assert (done.state, done.exit_code, done.nodes, done.restart_count) == ("COMPLETED", 0, pod, 0)
    assert client.logs(job_id, BACKEND) == gpus_seen(nodeset, pod)


def test_scale_in_drains_first_and_loses_no_job(cluster: DynamicCluster, nodeset: NodeSet, workdir: Path) -> None:
    pod = nodeset.pod(0)
    cluster.join(pod, nodeset.slurmd_conf)
    release = workdir / "release"
    first = submit(workdir, nodeset, "first", wait_for=release)
    client.wait_for(first, lambda job: job.state == "RUNNING", TIMEOUT_S, backend=BACKEND)
    second = submit(workdir, nodeset, "second")  # waits for the GPUs `first` holds

    # Scale-in: drain, and delete the pod only once the node is drained (not before `first` ends).
    run(["scontrol", "update", f"nodename={pod}", "state=drain", f"reason={DRAIN_REASON.format(pod=pod)}"])
    assert client.status(first, BACKEND).state == "RUNNING"  # draining lets the running job finish
    release.touch()
    finished = client.wait_for(first, timeout_s=TIMEOUT_S, backend=BACKEND)
    assert (finished.state, finished.exit_code, finished.restart_count) == ("COMPLETED", 0, 0)
    assert client.logs(first, BACKEND) == gpus_seen(nodeset, pod)
    # The node is free now, and drained: the scheduler must not give it to `second`.
    waiting = pending_after_a_scheduler_pass(second, scontrol_field("job", first, "EndTime"))
    assert waiting.state == "PENDING", waiting
    drained = node_state(pod)
    assert drained is not None and drained.state.split("+")[:2] == ["IDLE", "DRAIN"], drained

    run(["scontrol", "update", f"nodename={pod}", "state=down", f"reason={PRESTOP_REASON}"])  # the pod's preStop
    cluster.leave(pod)  # the pod is gone (slurmd stops), then the node record is deleted
    assert node_state(pod) is None
    assert partition_nodes(nodeset.name) == []
    assert [scontrol_field("partition", nodeset.name, f) for f in ("State", "TotalNodes")] == ["UP", "0"]
    assert pending_in(nodeset.name) == [second]  # still queued, and counted for the next scale-up

    rejoined_at = time.monotonic()
    cluster.join(pod, nodeset.slurmd_conf)  # the next scale-up brings a pod of the same name
    done = client.wait_for(second, timeout_s=TIMEOUT_S, backend=BACKEND)
    print(f"pod rejoined -> queued job done: {time.monotonic() - rejoined_at:.2f} s")
    assert (done.state, done.exit_code, done.nodes, done.restart_count) == ("COMPLETED", 0, pod, 0)
    assert client.logs(second, BACKEND) == gpus_seen(nodeset, pod)


def test_root_cannot_submit_with_the_controllers_settings(cluster: DynamicCluster, nodeset: NodeSet,
                                                          workdir: Path) -> None:
    """The Controller's `DisableRootJobs=YES`, on a real slurmctld: root's job is refused at submission."""
    assert "DisableRootJobs=YES" in nodeset.slurm_conf
    script = workdir / "as-root.sbatch"
    script.write_text("#!/bin/bash\ntrue\n")
    with pytest.raises(JobClientError, match="Invalid user id"):
        CliBackend().submit(script, client.SubmitOptions(partition=nodeset.name, nodes=1, time="1"))
