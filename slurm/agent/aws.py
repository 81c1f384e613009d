"""The agents' AWS clients: boto3, with its standard credential chain and adaptive retries.

Credentials: none are passed, so botocore's chain finds them (botocore/credentials.py create_credential_resolver:
environment, then a profile's, among them ProfileProviderBuilder's AssumeRoleWithWebIdentity from AWS_ROLE_ARN /
AWS_WEB_IDENTITY_TOKEN_FILE, then container and instance metadata). In the pod that
is IRSA: the service account's eks.amazonaws.com/role-arn annotation makes EKS set those two variables and project
the token (amazon-eks-pod-identity-webhook README), and botocore renews the credentials before they expire
(botocore/credentials.py RefreshableCredentials).

Retries: "adaptive" is "standard" (exponential backoff with jitter, a retry quota, throttling and transient errors
retried) plus a client-side rate limiter that slows down when EC2 throttles
(https://boto3.amazonaws.com/v1/documentation/api/latest/guide/retries.html; botocore/retries/adaptive.py). The
SDK reference (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html) advises it only where
one client owns its rate, not multi-tenant: here one controller, one role, one client.
"""

from __future__ import annotations

import boto3
from botocore.client import BaseClient
from botocore.config import Config

# Retries after the first attempt: botocore/config.py Config `retries` "max_attempts -- ... the maximum number of
# retry attempts" (total_max_attempts would count the first one too). A pass that still fails is logged and the
# next pass, a minute later, asks again (slurm/agent/health/__main__.py).
MAX_ATTEMPTS = 5
# Appended to the User-Agent header (botocore/config.py Config.user_agent_extra), so CloudTrail tells the
# agents' calls apart from other callers of the same role.
USER_AGENT_EXTRA = "slurm-eks-agent"


def client_config() -> Config:
    return Config(retries={"mode": "adaptive", "max_attempts": MAX_ATTEMPTS}, user_agent_extra=USER_AGENT_EXTRA)


def ec2_client(region: str) -> BaseClient:
    """An EC2 client for `region`; a session of its own, so no state is shared with boto3's default session."""
    return boto3.session.Session().client("ec2", region_name=region, config=client_config())
