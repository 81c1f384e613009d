"""moto's own S3 server (a real HTTP endpoint) for processes a test starts, with a bucket made: one definition for
the checkpoint store's tests and MLflow's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import boto3

from tests.conftest import unavailable


@contextmanager
def moto_s3(bucket: str, region: str) -> Iterator[str]:
    """Yields the endpoint (http://127.0.0.1:<port>) of a moto server holding `bucket` in `region`."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:  # moto[server] is in the dev extra
        unavailable(f"moto's server is missing ({exc}): make setup-extras")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        boto3.client("s3", endpoint_url=endpoint, region_name=region, aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
        yield endpoint
    finally:
        server.stop()
