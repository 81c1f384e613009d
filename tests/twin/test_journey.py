"""The researcher's journey on the twin of each shipped stack, partition by partition, as a declared user on the
login pod: `job render` with its defaults -> `sbatch` -> RUNNING on 2 nodes -> torchrun on the CPU -> Slurm's own
time-limit warning (USR2) -> checkpoint -> requeue -> resume -> COMPLETED with the parameters of an uninterrupted
run. Every seam on the way is the shipped one: the operator's slurm.conf for the plan, Slinky's entrypoints sizing
the nodes from the NodeSet's limits, the plan's NetworkPolicies enforced (scripts/twin)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from functools import cache
from pathlib import Path

import pytest

from scripts.twin.cluster import Twin, torchneuron_training, training_torchrun
from tests.twin.conftest import STATE_ROOT, USERS
from tests.twin.researcher import REPO, START_BOUND_S, TRAIN, Job, Researcher, admin, events, wait_for

pytestmark = [pytest.mark.twin]

# A small model: the journey is about the seams, and a 2-core machine runs every rank of both nodes.
SHAPE = ["--seed", "7", "--d-model", "32", "--n-layers", "1", "--n-heads", "2", "--seq-len", "16", "--batch-size", "2",
         "--vocab-size", "256", "--log-every", "10", "--stop-check-every", "20"]
# Enough steps that the first run is still training when USR2 comes (10 to 40 s after the job starts, below): 2 x 8
# ranks on an idle 2-core machine take about 13 s to start and 0.04 s a step, so 300 steps once ended before USR2
# came; 1000 take 40 s more. 2 ranks (Trainium, one worker per node here) run slower steps, 3000 of them. The ranks
# agree on a stop every 20 steps, not every 10 s of training (jobs/training/cadence.py), so a request is acted on
# at once however fast the steps are here.
STEPS = {False: ["--steps", "1000", "--checkpoint-every", "20"],
         True: ["--steps", "3000", "--checkpoint-every", "100"]}
# --time 3 with a 170 s lead: Slurm sends USR2 about 10 s into the first run (its time-limit check runs every
# 30 s or so), while the ranks still start: the stop must survive their start (jobs/training/preemption.py
# clear_stale), and it comes long before 300 steps end.
RENDER_FLAGS = ["--nodes", "2", "--time", "3", "--signal-lead", "170"]
RUN_BOUND_S = 600


@cache
def reference_hash(world_size: int, args: tuple[str, ...], torchneuron: bool = False) -> str:
    """The same training as one uninterrupted torchrun with the same number of ranks, on this machine, in the
    training environment the job had (the TorchNeuron image's for a native Trainium job)."""
    directory = STATE_ROOT / f"reference-{world_size}-{len(args)}-{args[1]}-{int(torchneuron)}"
    shutil.rmtree(directory, ignore_errors=True)  # a run left there would be resumed, not repeated
    torchrun, env = (torchneuron_training() if torchneuron else (training_torchrun(), {}))
    if torchneuron:
        env = {**env, "SLURM_EKS_DEVICE": "neuron"}
    result = subprocess.run(
        [str(torchrun), "--standalone", f"--nproc-per-node={world_size}",
         str(TRAIN), *args, "--checkpoint-dir", str(directory)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    (done,) = [e for e in events(result.stdout) if e.get("event") == "done"]
    return str(done["params_sha256"])


def partitions(twin: Twin) -> list[str]:
    return [ns["metadata"]["name"] for ns in twin.nodesets]


def neuron_partitions(twin: Twin) -> set[str]:
    """NodeSets whose slurmd asks the Neuron device plugin for devices."""
    return {ns["metadata"]["name"] for ns in twin.nodesets
            if "aws.amazon.com/neuron" in ((ns["spec"].get("slurmd") or {}).get("resources") or {}).get("limits", {})}


def report_start(twin: Twin, job: Job, partition: str, log: Path, submitted: float, running: float) -> None:
    """Where the time from sbatch to the training loop went, by stage (the controllers' events on the twin's clock,
    which no test moved here), into STATE_ROOT/from-zero-<stack>.json; the scale-up steps must be there."""
    deadline = time.monotonic() + RUN_BOUND_S
    while '"event": "start"' not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.5)
    training = time.monotonic()
    assert twin.controllers is not None, f"{job.where}: the twin runs no controllers"
    seen = {}
    for event in twin.controllers.events:
        if event.nodeset == partition and event.at >= submitted - 1:
            seen.setdefault(event.what, event.at)
    stages = {"sbatch -> KEDA activates (demand metric, scrape, poll)": seen.get("keda-activate"),
              "-> HPA scales to the job's nodes": seen.get("hpa-scale-up"),
              "-> Karpenter's nodes ready": seen.get("node-ready"),
              "-> slurmd pods started": seen.get("pod-started"),
              "-> job RUNNING (slurmd registered, scheduled)": running,
              "-> training loop starts (ranks up, first step next)": training}
    report, last = {}, submitted
    for stage, at in stages.items():
        if at is not None:
            report[stage] = round(at - last, 1)
            last = at
    report["total"] = round(training - submitted, 1)
    path = STATE_ROOT / f"from-zero-{job.where.split('/')[0]}.json"
    found = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**found, partition: report}, indent=1) + "\n")
    assert "pod-started" in seen, f"{job.where}: RUNNING without a pod started for it: {report}"


def requeue_journey(twin: Twin, person: Researcher, partition: str, entry: list[str],
                    one_worker_a_node: bool = False) -> tuple[Job, list[dict[str, object]]]:
    """`job render` -> sbatch -> RUNNING on 2 nodes -> Slurm's USR2 -> checkpoint -> requeue -> resume ->
    COMPLETED, checked at each step; returns the job and the events of its log."""
    script = person.render(partition, RENDER_FLAGS, entry, name=f"journey-{partition}")
    if one_worker_a_node:  # not one per NeuronCore: 2 x 32 (or 64) ranks do not fit 2 cores (README)
        person.sh(f"sed -i 's/--nproc-per-node=[0-9]*/--nproc-per-node=1/' {script}")
    submitted = time.monotonic()
    job = person.sbatch(script, partition)
    log = twin.state / "claims" / "fsx-shared" / "logs" / person.user / f"journey-{partition}-{job.id}.out"
    _state, _reason, nodes = wait_for(twin, job, ("RUNNING",), START_BOUND_S, log)
    running = time.monotonic()
    assert len(admin(twin, f"scontrol show hostnames {nodes}").stdout.split()) == 2, f"{job.where}: on {nodes}"
    report_start(twin, job, partition, log, submitted, running)
    # Slurm's time-limit warning: the batch shell's trap asks training to stop; it checkpoints and requeues.
    wait_for(twin, job, ("PENDING",), RUN_BOUND_S, log, reason="BeginTime")
    text = log.read_text()
    preempted = [e for e in events(text) if e.get("event") == "preempted"]
    assert "slurm-eks: USR2" in text and preempted, f"{job.where}: requeued without a USR2 checkpoint\n{text}"
    # A requeued job waits for its credential to expire (AuthInfo cred_expire, 120 s by default); an operator
    # lets it go now, and gives the second run the time to finish.
    admin(twin, f"scontrol update JobId={job.id} TimeLimit=20 && scontrol update JobId={job.id} StartTime=now")
    wait_for(twin, job, ("COMPLETED",), RUN_BOUND_S, log)
    text = log.read_text()
    resumed = [e for e in events(text) if e.get("event") == "resumed"]
    assert resumed and resumed[0]["step"] == preempted[0]["step"], f"{job.where}: did not resume\n{text}"
    # Its checkpoints are its own: under the person's private directory, in one of this job's.
    saved = {str(Path(e["path"]).parent) for e in events(text) if e.get("event") == "checkpoint"}
    assert saved == {f"/shared/checkpoints/{person.user}/journey-{partition}-{job.id}"}, (
        f"{job.where}: checkpoints in {sorted(saved)}, not in a directory of this person's and this job's")
    return job, events(text)


# Each partition in turn trains twice (the requeued run and the reference): prod's three partitions at the step
# counts above took over 874 s on an idle 2-core machine, past the suite's 900 s default.
@pytest.mark.timeout(1800)
def test_every_partition_trains_through_a_time_limit_requeue_to_the_reference(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    for partition in partitions(twin):
        neuron = partition in neuron_partitions(twin)
        args = (*STEPS[neuron], *SHAPE)
        # Prod's Trainium partition is trn1: the legacy torch-xla job, its entry point on the CPU here.
        entry = [str(TRAIN), *args, *(["--device", "cpu"] if neuron else [])]
        job, logged = requeue_journey(twin, person, partition, entry, one_worker_a_node=neuron)
        (done,) = [e for e in logged if e.get("event") == "done"]
        (start,) = [e for e in logged if e.get("event") == "start"][:1]
        assert done["params_sha256"] == reference_hash(int(start["world_size"]), args), (  # type: ignore[arg-type]
            f"{job.where}: the resumed run's parameters differ from an uninterrupted run's")


def test_the_layout_advise_recommends_renders_and_completes(stack_twin: tuple[str, Twin]) -> None:
    """`slurm-eks advise` on the login pod, for a model small enough for the CPU: its render command, as printed,
    gives a job that completes (the first partition of each stack: the journey above covers every partition)."""
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    partition = partitions(twin)[0]
    advice = person.sh(f"slurm-eks advise --stack {stack} --stacks-dir {REPO / 'stacks'} --partition {partition} "
                       "--model debug --seq-len 64 --global-batch 32", timeout=300).stdout
    (command,) = [line.strip() for line in advice.splitlines() if line.strip().startswith("slurm-eks job render")]
    command = command.replace(" -- jobs/train.py ", f" --stacks-dir {REPO / 'stacks'} -J advised -- {TRAIN} ")
    script = f"{person.home}/advised.sbatch"
    person.sh(f"{command} --steps 20 --checkpoint-every 10 > {script}")
    job = person.sbatch(script, partition)
    log = twin.state / "claims" / "fsx-shared" / "logs" / person.user / f"advised-{job.id}.out"
    wait_for(twin, job, ("COMPLETED",), RUN_BOUND_S, log)
    assert [e for e in events(log.read_text()) if e.get("event") == "done"], f"{job.where}: no done event"
