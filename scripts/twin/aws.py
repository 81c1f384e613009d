"""The twin's AWS, where the plan gives jobs an AWS identity (the checkpoint store: components/slinky/job_aws.py):
moto's server (moto 5.2.5, the project's AWS fake, its own HTTP endpoint: `python -m moto.server`) outside the
VPC, at an address the NetworkPolicies read as the internet. Jobs reach it through boto3's AWS_ENDPOINT_URL
(every service, STS's AssumeRoleWithWebIdentity with the pods' projected token among them: moto does not check
the token), which the twin adds to the jobs' `job.env`; the store's bucket exists, as preflight requires of a
real one. Also a local MLflow tracking server outside the VPC, for journeys that register models."""

from __future__ import annotations

import sys
from pathlib import Path

from components.config.checkpoint_store import JOB_ENV_FILE
from scripts.twin.network import OUTSIDE
from scripts.twin.pods import Container, Mount

AWS_INDEX, MLFLOW_INDEX = 10, 11  # hosts of network.OUTSIDE
AWS_PORT, MLFLOW_PORT = 5000, 5000
JOB_ENV_KEY = Path(JOB_ENV_FILE).name
VENV_BIN = Path(sys.executable).parent


def with_endpoint(job_env: str, address: str) -> str:
    """job.env with the twin's AWS as every service's endpoint."""
    return job_env.rstrip("\n") + f"\nAWS_ENDPOINT_URL=http://{address}:{AWS_PORT}\n"


def aws_container() -> Container:
    return Container("moto", [str(VENV_BIN / "python"), "-m", "moto.server", "-H", "0.0.0.0", "-p", str(AWS_PORT)],
                     {"PATH": "/usr/bin:/bin"}, [])  # fmt: skip


def create_bucket_command(bucket: str, region: str) -> list[str]:
    """Run in the AWS namespace: the store's bucket, made once moto answers."""
    code = ("import boto3,time\nfor _ in range(120):\n  try:\n"
            f"    s3=boto3.client('s3',endpoint_url='http://127.0.0.1:{AWS_PORT}',region_name={region!r},"
            "aws_access_key_id='twin',aws_secret_access_key='twin')\n"
            f"    s3.create_bucket(Bucket={bucket!r},CreateBucketConfiguration={{'LocationConstraint':{region!r}}})\n"
            "    break\n  except Exception:\n    time.sleep(0.5)\nelse:\n  raise SystemExit('moto did not answer')\n")
    return [str(VENV_BIN / "python"), "-c", code]


def mlflow_container(directory: Path) -> Container:
    """mlflow server (the add-on's release, 3.17.2) on SQLite, serving its artifacts from `directory`. Its Host
    check admits the address jobs use and localhost (mlflow 3.17.2 server/security_utils.py; --allowed-hosts)."""
    address = OUTSIDE.network_address + MLFLOW_INDEX
    return Container("mlflow", [str(VENV_BIN / "mlflow"), "server", "--backend-store-uri",
                                "sqlite:////var/lib/mlflow/mlflow.db", "--artifacts-destination",
                                "/var/lib/mlflow/artifacts", "--host", "0.0.0.0", "--port", str(MLFLOW_PORT),
                                "--workers", "1", "--allowed-hosts",
                                f"{address}:{MLFLOW_PORT},127.0.0.1:{MLFLOW_PORT},localhost:{MLFLOW_PORT}"],
                     {"PATH": f"{VENV_BIN}:/usr/bin:/bin", "HOME": "/var/lib/mlflow"},
                     [Mount(str(directory), "/var/lib/mlflow")])  # fmt: skip
