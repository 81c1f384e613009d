"""An EC2 client made as the agents make it (slurm/agent/aws.py), answered by botocore's Stubber.

moto 5.2.5 implements neither operation the agents call: its EC2 responses (moto/ec2/responses/) have no
DescribeInstanceTopology nor DescribeCapacityReservations, and a call raises NotImplementedError (checked in
tests/agent/test_aws.py, so a moto that gains them shows here). botocore's Stubber (botocore/stub.py) is the next
best thing: each request is validated against the service model (botocore/data/ec2/2016-11-15/service-2.json.gz)
before the stub sees it, compared with the parameters the test expects (operation and arguments), and each answer is
validated against the operation's output shape. Nothing is sent.
"""

from __future__ import annotations

import pytest
from botocore.client import BaseClient
from botocore.model import OperationModel
from botocore.stub import Stubber

from slurm.agent.aws import ec2_client

REGION = "us-west-2"


def static_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake static keys and nothing else of the machine's AWS setup: the client's credential chain stops at the
    environment (no profile, no IRSA variables, no instance metadata)."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")


def stubbed_ec2(monkeypatch: pytest.MonkeyPatch) -> tuple[BaseClient, Stubber]:
    """The agents' client with an active Stubber: queue answers with add_response / add_client_error, and end with
    assert_no_pending_responses (every queued call was made)."""
    static_credentials(monkeypatch)
    client = ec2_client(REGION)
    stub = Stubber(client)
    stub.activate()
    return client, stub


def recorded_operations(client: BaseClient) -> list[str]:
    """The operation names (DescribeInstanceTopology, ...) the client is asked for, in order: botocore's
    before-parameter-build event (botocore/client.py BaseClient._make_api_call emits it with the operation's model
    to every handler; before-call stops at the first that answers, which is the Stubber's)."""
    names: list[str] = []

    def record(model: OperationModel, **_: object) -> None:
        names.append(model.name)

    client.meta.events.register("before-parameter-build.ec2", record)
    return names
