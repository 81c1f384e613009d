"""`job render --evaluate`: the rendered script trains to DONE, submits the evaluation job with afterok on itself,
and that job's script (as sbatch received it) evaluates the newest checkpoint into a real MLflow with its lineage.
bash with real torchrun and jobs/train.py; stand-ins for srun, scontrol and sbatch (tests/render/standins.py)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from jobs.render import RenderError, evaluation_for, local_target, render_job
from tests.evaluation.conftest import TRAINED
from tests.jobs import runs
from tests.render.standins import job_sandbox, run_script

LOCAL = {"FAKE_NODE": "127.0.0.1", "SLURM_JOB_NODELIST": "127.0.0.1", "SLURM_NNODES": "1", "SLURM_JOB_NAME": "tiny",
         "SLURM_JOB_ID": "42", "PYTHONPATH": str(runs.REPO), "OMP_NUM_THREADS": "1"}  # fmt: skip


def test_a_finished_job_submits_its_evaluation_which_registers_the_checkpoint(tmp_path: Path,
                                                                              mlflow_server: str) -> None:  # fmt: skip
    from mlflow import MlflowClient

    sandbox = job_sandbox(tmp_path / "job")
    target = dataclasses.replace(sandbox.target(local_target(sandbox.shared, cpus=2, gpus=0)),
                                 registry_uri=mlflow_server, stack="dev")  # fmt: skip
    entry = [str(runs.TRAIN), *TRAINED]
    script = sandbox.root / "job.sbatch"
    script.write_text(render_job(target, entry, job_name="tiny", evaluate=evaluation_for(entry, "tiny")))
    log = sandbox.root / "tiny-42.out"

    trained = run_script(sandbox, script, {**LOCAL, "FAKE_STDOUT": str(log), "SLURM_CPUS_PER_TASK": "2"})
    assert trained.returncode == 0 and "evaluation job 43 starts once this job has ended" in trained.stdout, (
        trained.stdout[-2000:] + trained.stderr[-2000:])
    (submit,) = sandbox.calls("sbatch")
    assert "--dependency=afterok:42" in submit["argv"] and "--job-name=tiny-eval" in submit["argv"]
    # the training job's own Slurm settings stay out of the evaluation's environment (srun would refuse them)
    assert "SLURM_CPUS_PER_TASK" not in submit["env"]
    log.write_text(trained.stdout)  # what Slurm would have written to the job's StdOut

    # The evaluation job, as sbatch got it, with the environment its --export gives it.
    exported = next(a for a in submit["argv"] if a.startswith("--export=")).removeprefix("--export=ALL,")
    env = {**os.environ, **sandbox.env(**LOCAL), **dict(kv.split("=", 1) for kv in exported.split(","))}
    env.pop("MLFLOW_TRACKING_URI", None)
    evaluation = subprocess.run(["bash", "-s"], input=(sandbox.log / "sbatch.stdin").read_text(), env=env,
                                cwd=sandbox.root, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    assert (sandbox.checkpoints / "step-12.eval.json").is_file()

    client = MlflowClient(tracking_uri=mlflow_server)
    (version,) = [v for v in client.search_model_versions("name='tiny'") if v.tags.get("slurm_eks.job_id") == "42"]
    assert version.tags["slurm_eks.stack"] == "dev" and version.tags["slurm_eks.step"] == "12"
    losses = client.get_metric_history(version.run_id, "train/loss")
    assert len(losses) == 12, "the training job's losses, read from its output file"


def test_only_train_py_checkpoints_are_rendered_for_evaluation() -> None:
    with pytest.raises(RenderError, match=r"evaluate a Hugging Face model with `python jobs/evaluate\.py --hf-model"):
        evaluation_for(["jobs/recipes/hf_finetune.py", "--model", "x"], "ft")
