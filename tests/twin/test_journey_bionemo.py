"""BioNeMo's Slurm job on prod's twin: `slurm-eks job bionemo` on the login pod, sbatch, and the script through
Slurm 25.11, pyxis (the twin's stand-in checks the imported image file), the enforced NetworkPolicies and the slurmd
pods: the weights step (one task) then infer_esm2 on one task per GPU of the node, with the ranks Lightning reads
from Slurm. The image's two commands are stand-ins on the researcher's PATH (the twin has no BioNeMo image and no
GPU): what they are given, and where, is what the test checks. What only a GPU node shows: docs/bionemo.md."""

from __future__ import annotations

import json
import shlex

import pytest

from scripts.twin.cluster import Twin
from tests.twin.conftest import USERS
from tests.twin.researcher import SLURM_EKS, START_BOUND_S, Researcher, admin, wait_for
from tests.twin.test_journey import RUN_BOUND_S

pytestmark = [pytest.mark.twin]

PARTITION = "gpu-h100"  # 8 GPUs a node
# The image's commands: download_bionemo_data prints where the weights are (bionemo-core data/load.py); infer_esm2
# records its arguments and the rank Slurm gave the task.
DOWNLOAD = '#!/bin/bash\nmkdir -p "${BIONEMO_CACHE_DIR}/esm2"\necho "${BIONEMO_CACHE_DIR}/esm2"\n'
INFER = ('#!/bin/bash\nprintf \'{"rank": %s, "local": %s, "argv": "%s"}\\n\' "${SLURM_PROCID}" "${SLURM_LOCALID}" '
         '"$*" >> "${HOME}/bionemo-calls.jsonl"\n')


@pytest.mark.timeout(900)
@pytest.mark.parametrize("stack_twin", ["prod"], indirect=True)
def test_the_bionemo_job_runs_the_weights_step_then_one_inference_task_per_gpu(
        stack_twin: tuple[str, Twin]) -> None:  # fmt: skip
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    tools = f"{person.home}/bionemo-bin"
    person.sh(f"mkdir -p {tools} && printf %s {shlex.quote(DOWNLOAD)} > {tools}/download_bionemo_data && "
              f"printf %s {shlex.quote(INFER)} > {tools}/infer_esm2 && chmod +x {tools}/* && "
              f"echo sequences > {person.home}/sequences.csv && rm -f {person.home}/bionemo-calls.jsonl")
    script = f"{person.home}/bionemo.sbatch"
    person.sh(shlex.join([str(SLURM_EKS), "job", "bionemo", "--stack", stack, "--partition", PARTITION,
                          "--stacks-dir", str(person.stacks_dir), "-o", script, "--",
                          "--data-path", f"{person.home}/sequences.csv"]))  # fmt: skip
    cache = f"{person.home}/bionemo-cache"  # the models' file system is read-only to jobs: a cache of one's own
    job = person.sbatch(script, PARTITION, f"--export=ALL,PATH={tools}:/usr/local/bin:/usr/bin:/bin,"
                                           f"BIONEMO_CACHE_DIR={cache}")  # fmt: skip
    log = twin.state / "claims" / "fsx-shared" / "logs" / person.user / f"bionemo-esm2-{job.id}.out"
    wait_for(twin, job, ("RUNNING", "COMPLETED"), START_BOUND_S, log)
    wait_for(twin, job, ("COMPLETED",), RUN_BOUND_S, log)

    calls = [json.loads(line) for line in
             person.sh(f"cat {person.home}/bionemo-calls.jsonl").stdout.splitlines()]  # fmt: skip
    assert sorted(c["rank"] for c in calls) == list(range(8)), f"{job.where}: not one task per GPU: {calls}"
    assert sorted(c["local"] for c in calls) == list(range(8))
    argv = calls[0]["argv"]
    assert f"--checkpoint-path {cache}/esm2" in argv and f"--data-path {person.home}/sequences.csv" in argv
    assert "--num-gpus 8 --num-nodes 1" in argv
    results = argv.split("--results-path ")[1].split()[0]
    assert results.startswith(f"/shared/checkpoints/{person.user}/") and results.endswith(f"bionemo-esm2-{job.id}")
    mode = admin(twin, f"stat -c %a {shlex.quote(results)}").stdout.strip()
    assert mode == "700", f"{job.where}: the results directory is not the job's own ({mode})"
