"""The standard-library AWS client: each signature equals botocore's SigV4Auth for the same request, STS
credentials are read from the AssumeRoleWithWebIdentity answer and renewed before they expire, errors carry AWS's
code and message."""

from __future__ import annotations

import urllib.parse
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

from slurm.aws.query import AwsError, QueryClient, _error_text, web_identity_credentials
from slurm.aws.sigv4 import FORM, Credentials, signed_headers

NOW = datetime(2026, 12, 2, 11, 30, 5, tzinfo=UTC)
URL = "https://ec2.us-west-2.amazonaws.com/"

# The AssumeRoleWithWebIdentity answer in the shape of the STS API reference's example response
# (https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html), values ours.
STS_ANSWER = b"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:slurm:slurm-eks-repair</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/lifecycle/slurm-eks-lifecycle</Arn>
      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:slurm-eks-lifecycle</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>IQoJb3JpZ2luX2VjEXAMPLETOKEN</SessionToken>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <Expiration>2026-12-02T12:30:05Z</Expiration>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
    </Credentials>
    <Provider>arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>"""
EC2_ERROR = (b'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>UnauthorizedOperation</Code>'
             b"<Message>You are not authorized to perform this operation.</Message></Error></Errors>"
             b"<RequestID>d3b4b4a5-EXAMPLE</RequestID></Response>")


def botocore_authorization(body: bytes, credentials: Credentials) -> str:
    request = AWSRequest(method="POST", url=URL, data=body, headers={"Content-Type": FORM})
    boto = BotoCredentials(credentials.access_key, credentials.secret_key, credentials.token)
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW.replace(tzinfo=None)):
        SigV4Auth(boto, "ec2", "us-west-2").add_auth(request)
    return request.headers["Authorization"]


@pytest.mark.parametrize("token", [None, "IQoJb3JpZ2luX2VjEXAMPLETOKEN"])
def test_signature_equals_botocores(token: str | None) -> None:
    credentials = Credentials("ASIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY", token)
    body = urllib.parse.urlencode({"Action": "DescribeInstanceTopology", "Version": "2016-11-15",
                                   "InstanceId.1": "i-0123456789abcdef0"}).encode()
    ours = signed_headers(URL, body, "us-west-2", "ec2", credentials, NOW)
    assert ours["authorization"] == botocore_authorization(body, credentials)
    wrong = signed_headers(URL, body + b"&x=1", "us-west-2", "ec2", credentials, NOW)
    assert wrong["authorization"] != ours["authorization"]


def test_web_identity_then_signed_calls_renewed_before_expiry(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.projected.token\n")
    sent: list[tuple[str, dict[str, str]]] = []
    clock = [NOW]

    def post(url: str, body: bytes, headers: dict[str, str]) -> bytes:
        fields = dict(urllib.parse.parse_qsl(body.decode()))
        sent.append((url, fields))
        if fields["Action"] == "AssumeRoleWithWebIdentity":
            assert fields["WebIdentityToken"] == "eyJhbGciOiJSUzI1NiJ9.projected.token"
            assert "authorization" not in headers  # STS takes this call unsigned
            return STS_ANSWER
        assert "Credential=ASIAIOSFODNN7EXAMPLE/20261202/us-west-2/ec2/aws4_request" in headers["authorization"]
        assert headers["x-amz-security-token"] == "IQoJb3JpZ2luX2VjEXAMPLETOKEN"
        return b'<DescribeInstanceTopologyResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"/>'

    client = QueryClient("ec2", "us-west-2", "2016-11-15",
                         lambda: web_identity_credentials("arn:aws:iam::123456789012:role/lifecycle", token,
                                                          "us-west-2", post),
                         post, clock=lambda: clock[0])
    client.call("DescribeInstanceTopology", {})
    client.call("DescribeInstanceTopology", {})
    clock[0] = NOW + timedelta(minutes=56)  # five minutes before the hour's credentials expire
    client.call("DescribeInstanceTopology", {})
    actions = [fields["Action"] for _, fields in sent]
    assert actions == ["AssumeRoleWithWebIdentity", "DescribeInstanceTopology", "DescribeInstanceTopology",
                       "AssumeRoleWithWebIdentity", "DescribeInstanceTopology"]
    assert sent[0][0] == "https://sts.us-west-2.amazonaws.com/"


def test_errors_name_code_and_message() -> None:
    assert _error_text(EC2_ERROR) == "UnauthorizedOperation: You are not authorized to perform this operation."
    with pytest.raises(AwsError, match="without credentials"):
        web_identity_credentials("arn", Path(__file__), "us-west-2", lambda *_: b"<x/>")
