"""slurm/agent/aws.py: the client finds IRSA's credentials on its own (botocore's chain, against moto's STS and
EC2), retries adaptively, and names slurm-eks; and moto still lacks the two operations the agents call (why their
tests use botocore's Stubber, tests/agent/ec2.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from botocore.exceptions import NoCredentialsError
from moto import mock_aws
from moto.sts.models import sts_backends

from slurm.agent.aws import MAX_ATTEMPTS, USER_AGENT_EXTRA, ec2_client
from slurm.agent.health.__main__ import STEP_ERRORS
from tests.agent.ec2 import REGION, static_credentials

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/repair-ec2"
# moto puts keys of its own in the environment unless told not to (moto/core/models.py MockAWS.start,
# moto/core/config.py mock_credentials).
NO_KEYS = {"core": {"mock_credentials": False}}


@pytest.fixture
def irsa(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The pod's environment as EKS's pod identity webhook sets it (amazon-eks-pod-identity-webhook README): a role
    and a projected token file, and no static keys anywhere (moto too: NO_KEYS)."""
    static_credentials(monkeypatch)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.sig\n")
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE)
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))


def test_the_first_ec2_call_runs_on_the_role_irsa_names(irsa: None) -> None:
    with mock_aws(config=NO_KEYS):
        ec2 = ec2_client(REGION)
        signed: list[str] = []
        ec2.meta.events.register("before-send.ec2", lambda request, **_: signed.append(
            request.headers["Authorization"].decode()))
        assert ec2.describe_instances()["Reservations"] == []
        (assumed,) = sts_backends[ACCOUNT]["aws"].assumed_roles
        assert assumed.role_arn == ROLE
        # The EC2 request is signed with the keys STS handed out for the role, not any other.
        assert f"Credential={assumed.access_key_id}/" in signed[0]


def test_credentials_that_cannot_be_had_fail_the_step_not_the_controller(
        irsa: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The errors the controller's EC2 steps log and go on from (slurm/agent/health/__main__.py STEP_ERRORS): a token
    # file that is not there is an OSError (botocore/utils.py FileWebIdentityTokenLoader opens it), no credentials
    # at all a BotoCoreError (NoCredentialsError).
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "missing"))
    with mock_aws(config=NO_KEYS), pytest.raises(FileNotFoundError):
        ec2_client(REGION).describe_instances()
    monkeypatch.delenv("AWS_ROLE_ARN")
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE")
    with mock_aws(config=NO_KEYS), pytest.raises(NoCredentialsError):
        ec2_client(REGION).describe_instances()
    assert issubclass(FileNotFoundError, STEP_ERRORS) and issubclass(NoCredentialsError, STEP_ERRORS)


def test_retries_are_adaptive_and_the_agent_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    static_credentials(monkeypatch)
    config = ec2_client(REGION).meta.config
    # botocore stores max_attempts (retries after the first) as total_max_attempts (the first counted).
    assert config.retries == {"mode": "adaptive", "total_max_attempts": MAX_ATTEMPTS + 1}
    assert config.user_agent_extra == USER_AGENT_EXTRA and "slurm-eks" in USER_AGENT_EXTRA
    assert config.region_name == REGION


@pytest.mark.parametrize("operation", ["describe_instance_topology", "describe_capacity_reservations"])
def test_moto_still_lacks_the_agents_operations(monkeypatch: pytest.MonkeyPatch, operation: str) -> None:
    """When this fails, moto implements the operation: move its tests from the Stubber to moto."""
    static_credentials(monkeypatch)
    with mock_aws(), pytest.raises(NotImplementedError):
        getattr(ec2_client(REGION), operation)()
