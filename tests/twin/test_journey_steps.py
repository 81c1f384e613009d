"""The rest of a researcher's day on the twin: slurmctld's messages reach an `srun` inside a batch script (it runs
in a slurmd pod, listening on SrunPortRange), a person cancels one step and the job goes on, another person can
neither read the first's job output nor touch their checkpoints, and a slurmd pod taken away (Slinky's preStop
hook, then the pod's end, as when Karpenter gives a node back) requeues the job that ran there."""

from __future__ import annotations

import time

import pytest

from components.slinky.slurm_conf import SRUN_PORT_RANGE
from scripts.twin.cluster import Twin
from tests.twin.conftest import USERS
from tests.twin.researcher import START_BOUND_S, Researcher, admin, job_state, wait_for

pytestmark = [pytest.mark.twin]

STEP_SCRIPT = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=10
srun --ntasks-per-node=1 sleep 600 &
wait
echo "first step ended"
srun --ntasks-per-node=1 hostname
echo "second step ran"
"""
# Someone the stack declares besides the researcher, in prod the same account (llm): still not their files.
OTHERS = {"prod": "bob"}


def steps_of(twin: Twin, job_id: int) -> list[str]:
    out = admin(twin, f"squeue -h -s -j {job_id} -o %i").stdout.split()
    return [s for s in out if not s.endswith((".batch", ".extern"))]


def test_a_step_cancelled_alone_ends_and_the_job_goes_on(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    partition = twin.nodesets[0]["metadata"]["name"]
    person.sh(f"cat > steps.sbatch <<'EOF'\n{STEP_SCRIPT}EOF")
    job = person.sbatch(f"{person.home}/steps.sbatch", partition, f"--partition={partition}",
                        f"--output={person.home}/steps-%j.out")
    log = twin.state / "claims" / "fsx-shared" / "home" / person.user / f"steps-{job.id}.out"
    wait_for(twin, job, ("RUNNING",), START_BOUND_S, log)
    deadline = time.monotonic() + 60
    while not steps_of(twin, job.id) and time.monotonic() < deadline:
        time.sleep(1)
    assert steps_of(twin, job.id) == [f"{job.id}.0"], f"{job.where}: its srun step never started"
    person.sh(f"scancel {job.id}.0")
    wait_for(twin, job, ("COMPLETED",), 120, log)
    text = log.read_text()
    assert "first step ended" in text and "second step ran" in text, f"{job.where}:\n{text}"
    # slurmctld told the batch script's srun (in the first slurmd pod) that its step ended: a connection from
    # slurmctld to a slurmd pod on a port of SrunPortRange, recorded there (test_journey_zflows checks that
    # every recorded connection is one the policies admit and the deploy check knows).
    controller = twin.network.links[twin.pod("controller").name].address
    low, high = SRUN_PORT_RANGE
    callbacks = [r for r in twin.recorded() if r.direction == "egress_new" and r.pod == twin.pod("controller").name
                 and low <= r.port <= high]
    assert callbacks, f"{job.where}: slurmctld ({controller}) never called back an srun in a batch step"


def test_another_person_can_read_no_output_and_touch_no_checkpoint(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    if stack not in OTHERS:
        pytest.skip(f"stack {stack} declares one person")
    person, other = Researcher(twin, USERS[stack], stack), Researcher(twin, OTHERS[stack], stack)
    logs = f"/shared/logs/{person.user}"
    checkpoints = f"/shared/checkpoints/{person.user}"
    # What the person's jobs run and load: their imported images and compiled Neuron graphs (jobs/templates/
    # own_directory.sh), made private by the login pod's identity setup like the logs and checkpoints.
    images, graphs = f"/shared/images/{person.user}", f"/shared/neuron-cache/{person.user}"
    person.sh(f"echo output > {logs}/probe.out && mkdir -p {checkpoints}/probe && echo weights > {checkpoints}/probe/w"
              f" && echo squashfs > {images}/train.sqsh && echo neff > {graphs}/graph.neff")
    for attempt in (f"cat {logs}/*.out", f"ls {logs}", f"touch {checkpoints}/probe/STOP",
                    f"echo poisoned > {checkpoints}/probe/w", f"rm -rf {checkpoints}/probe", f"mkdir {logs}/mine",
                    f"echo poisoned > {images}/train.sqsh", f"touch {images}/other.sqsh",
                    f"mv {images} /shared/images/gone", f"echo poisoned > {graphs}/graph.neff"):
        result = other.sh(attempt, check=False)
        assert result.returncode != 0, f"{stack}: {other.user} could `{attempt}` in {person.user}'s files"
    assert person.sh(f"cat {checkpoints}/probe/w {images}/train.sqsh").stdout == "weights\nsquashfs\n"
    # Nor cancel or signal the person's jobs.
    partition = twin.nodesets[0]["metadata"]["name"]
    job = person.sbatch("--wrap=sleep 300", partition, f"--partition={partition}", "--output=/dev/null")
    wait_for(twin, job, ("RUNNING", "PENDING"), 60)
    other.sh(f"scancel {job.id}", check=False)
    assert job_state(twin, job)[0] in ("RUNNING", "PENDING"), f"{job.where}: {other.user} cancelled it"
    admin(twin, f"scancel {job.id}")


NAMESPACE_SCRIPT = """#!/bin/bash
#SBATCH --nodes=1
#SBATCH --time=5
echo "tmp: $(ls -A /tmp | tr '\\n' ' ')"
echo "shm: $(ls -A /dev/shm | tr '\\n' ' ')"
echo "shm is $(findmnt -n -o FSTYPE --target /dev/shm)"
echo "from job $SLURM_JOB_ID" > "/tmp/left-by-$SLURM_JOB_ID"
echo "from job $SLURM_JOB_ID" > "/dev/shm/left-by-$SLURM_JOB_ID"
"""


def test_each_job_has_its_own_tmp_and_shm_and_they_go_with_it(stack_twin: tuple[str, Twin]) -> None:
    """NamespaceType=namespace/tmpfs with PrologFlags=Contain (components/slinky/slurm_conf.py), on the real slurmd:
    what a job leaves in /tmp or /dev/shm is gone before the next job on that node starts, so nobody reads (or
    plants) another's temporary files or shared memory."""
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    partition = twin.nodesets[0]["metadata"]["name"]
    person.sh(f"cat > ns.sbatch <<'EOF'\n{NAMESPACE_SCRIPT}EOF")
    logs = twin.state / "claims" / "fsx-shared" / "home" / person.user
    first = person.sbatch(f"{person.home}/ns.sbatch", partition, f"--partition={partition}",
                          f"--output={person.home}/ns-%j.out")
    _state, _reason, node = wait_for(twin, first, ("COMPLETED",), 120, logs / f"ns-{first.id}.out")
    second = person.sbatch(f"{person.home}/ns.sbatch", partition, f"--partition={partition}", f"--nodelist={node}",
                           f"--output={person.home}/ns-%j.out")
    wait_for(twin, second, ("COMPLETED",), 120, logs / f"ns-{second.id}.out")
    text = (logs / f"ns-{second.id}.out").read_text()
    assert f"left-by-{first.id}" not in text, f"{second.where} on {node} saw job {first.id}'s files:\n{text}"
    assert "shm is tmpfs" in text, f"{second.where}: /dev/shm is not the job's own tmpfs:\n{text}"
    # Nor did they land in the slurmd pod's own /tmp or /dev/shm.
    leftovers = twin.pods[node].started.exec(["bash", "-c", "ls /tmp /dev/shm"], timeout=30).stdout
    assert f"left-by-{first.id}" not in leftovers, f"job {first.id}'s files are in {node}'s own /tmp or /dev/shm"


def test_a_person_can_mint_a_token_for_a_day_and_no_longer(stack_twin: tuple[str, Twin]) -> None:
    """AuthAltParameters=max_token_lifespan (slurm.restapi.maxTokenLifespan) through the operator's merge, enforced by
    the real slurmctld (src/slurmctld/proc_req.c: "rejecting token lifespan ... exceeds limit")."""
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    assert person.sh("scontrol token lifespan=3600").stdout.startswith("SLURM_JWT=")
    forever = person.sh("scontrol token lifespan=31536000", check=False)
    assert forever.returncode != 0 and not forever.stdout.startswith("SLURM_JWT="), \
        f"{stack}: a one-year token was issued: {forever.stdout}{forever.stderr}"


def test_a_slurmd_pod_taken_away_requeues_its_job(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    partition = twin.nodesets[0]["metadata"]["name"]
    job = person.sbatch("--wrap=srun sleep 600", partition, f"--partition={partition}", "--nodes=1", "--requeue",
                        "--time=20", "--output=/dev/null")
    _state, _reason, node = wait_for(twin, job, ("RUNNING",), START_BOUND_S)
    twin.delete_pod(node)
    try:
        state, reason, _nodes = wait_for(twin, job, ("PENDING", "RUNNING"), 90)
        requeued = admin(twin, f"scontrol show job {job.id}").stdout
        assert "Restarts=1" in requeued, f"{job.where}: not requeued when {node} went away ({state}, {reason})"
    finally:
        admin(twin, f"scancel {job.id}")
        # The NodeSet controller makes the pod again on its node (scripts/twin/scaling.py), under the same name.
        twin.wait_pod_alive(node, 120)
        admin(twin, f"scontrol update nodename={node} state=resume || true", timeout=30)
        twin.wait_nodes([node], ("idle",))
