"""The checkpoint store and the model registry on prod's twin: a job trains, is preempted by Slurm's own USR2, its
checkpoint reaches S3 (the twin's AWS: moto's server outside the VPC, reached through the NetworkPolicies with the
NodeSet pods' projected token and job.env: components/slinky/job_aws.py), its directory on /shared is deleted,
the requeued run restores from S3 and ends on an uninterrupted run's parameters; then the evaluation job it
submitted (`job render --evaluate`) registers the checkpoint as a model version, with its lineage, in a local
MLflow tracking server (mlflow 3.17.2, outside the VPC too)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.twin import aws
from scripts.twin.cluster import Twin
from scripts.twin.network import PodLink
from tests.twin.conftest import USERS
from tests.twin.researcher import START_BOUND_S, TRAIN, Job, Researcher, admin, events, wait_for
from tests.twin.test_journey import RENDER_FLAGS, RUN_BOUND_S, SHAPE, STEPS, reference_hash

pytestmark = [pytest.mark.twin]

PARTITION = "gpu-h100"
STORE = "s3://ml-data/checkpoint-store"  # stacks/Pulumi.prod.yaml storage.checkpointStore


def in_namespace(link: PodLink, code: str) -> str:
    """Python (this repository's venv) in a namespace outside the VPC, printing JSON."""
    result = subprocess.run(["ip", "netns", "exec", link.netns, str(aws.VENV_BIN / "python"), "-c", code],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.fixture
def mlflow(stack_twin: tuple[str, Twin]) -> Iterator[PodLink]:
    _, twin = stack_twin
    directory = twin.state / "mlflow"
    directory.mkdir(exist_ok=True)
    link = twin.start_outside("mlflow", aws.MLFLOW_INDEX, aws.mlflow_container(directory))
    in_namespace(link, "import time,urllib.request\nfor _ in range(240):\n  try:\n"
                       f"    urllib.request.urlopen('http://127.0.0.1:{aws.MLFLOW_PORT}/health',timeout=2); break\n"
                       "  except OSError: time.sleep(0.5)\nelse: raise SystemExit('mlflow did not start')")
    yield link


def stored_checkpoints(twin: Twin, prefix: str) -> list[str]:
    code = ("import boto3,json\ns3=boto3.client('s3',endpoint_url='http://127.0.0.1:5000',region_name='us-west-2',"
            "aws_access_key_id='twin',aws_secret_access_key='twin')\n"
            f"items=s3.list_objects_v2(Bucket='ml-data',Prefix={prefix!r}).get('Contents',[])\n"
            "print(json.dumps(sorted(o['Key'] for o in items if o['Key'].endswith('slurm-eks-manifest.json'))))")
    return json.loads(in_namespace(twin.aws, code))


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("stack_twin", ["prod"], indirect=True)
def test_a_job_that_lost_shared_resumes_from_s3_and_its_evaluation_is_registered(
        stack_twin: tuple[str, Twin], mlflow: PodLink) -> None:  # fmt: skip
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    args = (*STEPS[False], *SHAPE)
    name = "ckpt-journey"
    script = person.render(PARTITION, [*RENDER_FLAGS, "--evaluate"], [str(TRAIN), *args], name=name)
    tracking = f"http://{mlflow.address}:{aws.MLFLOW_PORT}"
    # The twin's checkout is root's, not the researcher's (in the cluster it is their own clone): git's
    # safe.directory, given as command-line configuration (git-config(1) GIT_CONFIG_COUNT), lets the evaluation
    # read the commit it records.
    git = "GIT_CONFIG_COUNT=1,GIT_CONFIG_KEY_0=safe.directory,GIT_CONFIG_VALUE_0=*"
    job = person.sbatch(script, PARTITION, f"--export=ALL,MLFLOW_TRACKING_URI={tracking},{git}")
    log = twin.state / "claims" / "fsx-shared" / "logs" / person.user / f"{name}-{job.id}.out"
    job_dir = f"/shared/checkpoints/{person.user}/{name}-{job.id}"

    wait_for(twin, job, ("RUNNING",), START_BOUND_S, log)
    wait_for(twin, job, ("PENDING",), RUN_BOUND_S, log, reason="BeginTime")  # preempted by USR2, requeued
    text = log.read_text()
    (preempted,) = [e for e in events(text) if e.get("event") == "preempted"]
    step = int(preempted["step"])  # type: ignore[call-overload]
    assert f"slurm-eks ckpt: copied step-{step}" in text, f"{job.where}: the preemption's checkpoint not in S3\n{text}"
    prefix = f"checkpoint-store/{person.user}/{name}-{job.id}/"
    assert f"{prefix}step-{step}/slurm-eks-manifest.json" in stored_checkpoints(twin, prefix)

    admin(twin, f"rm -rf {job_dir}")  # /shared lost the job's directory
    admin(twin, f"scontrol update JobId={job.id} TimeLimit=20 && scontrol update JobId={job.id} StartTime=now")
    wait_for(twin, job, ("COMPLETED",), RUN_BOUND_S, log)
    text = log.read_text()
    assert f"slurm-eks ckpt: restored step-{step}" in text, f"{job.where}: not restored from S3\n{text[-3000:]}"
    resumed = [e for e in events(text) if e.get("event") == "resumed"]
    assert resumed and resumed[-1]["step"] == step, f"{job.where}: did not resume from S3's step {step}"
    (done,) = [e for e in events(text) if e.get("event") == "done"]
    starts = [e for e in events(text) if e.get("event") == "start"]
    assert done["params_sha256"] == reference_hash(int(starts[0]["world_size"]), args), (  # type: ignore[arg-type]
        f"{job.where}: the run resumed from S3 ends elsewhere than an uninterrupted one")
    final = int(done["step"])  # type: ignore[call-overload]

    # The evaluation job the finished job submitted (afterok on it), on one node of the same partition.
    listed = admin(twin, f"squeue -h -t all -n {name}-eval -o %i").stdout.split()
    assert listed, f"{job.where}: no evaluation job was submitted\n{text[-2000:]}"
    evaluation = Job(int(listed[0]), f"{stack}/{PARTITION} job {listed[0]} (evaluation)")
    eval_log = twin.state / "claims" / "fsx-shared" / "logs" / person.user / f"{name}-eval-{evaluation.id}.out"
    wait_for(twin, evaluation, ("COMPLETED",), RUN_BOUND_S, eval_log)
    result = json.loads((twin.state / "claims" / "fsx-shared" / job_dir.removeprefix("/shared/") /
                         f"step-{final}.eval.json").read_text())  # fmt: skip
    assert result["metrics"]["perplexity"] > 1 and result["lineage"]["job_id"] == str(job.id)

    found = json.loads(in_namespace(mlflow, (
        "import json\nfrom mlflow import MlflowClient\n"
        f"c=MlflowClient(tracking_uri='http://127.0.0.1:{aws.MLFLOW_PORT}')\n"
        f"v=[x for x in c.search_model_versions(\"name='{name}'\")]\n"
        "print(json.dumps([{'source': x.source, 'tags': x.tags, 'run': x.run_id} for x in v]))")))
    (version,) = found
    assert version["source"] == f"{STORE}/{person.user}/{name}-{job.id}/step-{final}"
    tags = version["tags"]
    assert tags["slurm_eks.job_id"] == str(job.id) and tags["slurm_eks.stack"] == "prod"
    assert tags["slurm_eks.data"] == "synthetic" and len(tags["slurm_eks.code_commit"]) == 40
    assert f"{prefix}step-{final}/slurm-eks-manifest.json" in stored_checkpoints(twin, prefix)
    assert Path(eval_log).exists()
