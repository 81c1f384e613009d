"""S3 for the checkpoint store's tests: moto's in-process mock for the engine, and moto's own server (a real HTTP
endpoint) for the processes the job script starts, reached the way a job reaches S3: boto3's standard chain with
AWS_ENDPOINT_URL_S3."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.s3_server import moto_s3

BUCKET = "ml-checkpoints"
REGION = "us-west-2"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}  # fmt: skip


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from moto import mock_aws

    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        yield client


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, str]]:
    """A moto S3 server with the bucket made; yields the environment that points boto3 at it."""
    with moto_s3(BUCKET, REGION) as endpoint:
        env = {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL_S3": endpoint}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield env
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
