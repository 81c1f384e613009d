"""A Query API client (EC2) on IRSA credentials: the pod's projected service account token traded with STS
AssumeRoleWithWebIdentity, which needs no signature (EKS sets AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE in a pod
whose service account is annotated eks.amazonaws.com/role-arn: amazon-eks-pod-identity-webhook README)."""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from slurm.aws.sigv4 import FORM, Credentials, signed_headers

EC2_VERSION = "2016-11-15"  # botocore data/ec2/2016-11-15/service-2.json
# EC2 responses carry the API version's namespace: http://ec2.amazonaws.com/doc/<Version>/.
EC2_NAMESPACE = f"http://ec2.amazonaws.com/doc/{EC2_VERSION}/"
STS_VERSION = "2011-06-15"
STS_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"
REFRESH_BEFORE = timedelta(minutes=5)
Post = Callable[[str, bytes, dict[str, str]], bytes]


class AwsError(RuntimeError):
    """An AWS API answered an error (its code and message), or could not be reached."""


def http_post(url: str, body: bytes, headers: dict[str, str]) -> bytes:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise AwsError(f"{url}: HTTP {exc.code}: {_error_text(exc.read())}") from None
    except OSError as exc:
        raise AwsError(f"{url}: {exc}") from None


def _error_text(body: bytes) -> str:
    """Code and message of an error response, whichever namespace it uses."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return body[:200].decode(errors="replace")
    texts = {el.tag.rpartition("}")[2]: (el.text or "") for el in root.iter()}
    return f"{texts.get('Code', '?')}: {texts.get('Message', '')}"


def web_identity_credentials(role_arn: str, token_file: Path, region: str, post: Post = http_post,
                             endpoint: str | None = None) -> Credentials:
    """STS AssumeRoleWithWebIdentity (AssumeRoleWithWebIdentityResult/Credentials: botocore data/sts/2011-06-15
    service-2.json)."""
    body = urllib.parse.urlencode({
        "Action": "AssumeRoleWithWebIdentity", "Version": STS_VERSION, "RoleArn": role_arn,
        "RoleSessionName": "slurm-eks-lifecycle", "WebIdentityToken": token_file.read_text().strip()}).encode()
    root = ET.fromstring(post(endpoint or f"https://sts.{region}.amazonaws.com/", body, {"content-type": FORM}))
    creds = root.find(f"{STS_NS}AssumeRoleWithWebIdentityResult/{STS_NS}Credentials")
    if creds is None:
        raise AwsError("AssumeRoleWithWebIdentity answered without credentials")

    def text(name: str) -> str:
        return creds.findtext(f"{STS_NS}{name}") or ""

    expires = datetime.fromisoformat(text("Expiration").replace("Z", "+00:00"))
    return Credentials(text("AccessKeyId"), text("SecretAccessKey"), text("SessionToken"), expires)


class QueryClient:
    """Signed POSTs to one Query API service, with credentials renewed before they expire."""

    def __init__(self, service: str, region: str, version: str, credentials: Callable[[], Credentials],
                 post: Post = http_post, endpoint: str | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.service, self.region, self.version = service, region, version
        self.endpoint = endpoint or f"https://{service}.{region}.amazonaws.com/"
        self._source, self._post, self._clock = credentials, post, clock
        self._credentials: Credentials | None = None

    @classmethod
    def ec2_in_pod(cls, region: str) -> QueryClient:
        role, token = os.environ["AWS_ROLE_ARN"], Path(os.environ["AWS_WEB_IDENTITY_TOKEN_FILE"])
        return cls("ec2", region, EC2_VERSION, lambda: web_identity_credentials(role, token, region))

    def _current(self) -> Credentials:
        c = self._credentials
        if c is None or (c.expires is not None and c.expires - REFRESH_BEFORE <= self._clock()):
            self._credentials = c = self._source()
        return c

    def call(self, action: str, params: dict[str, str]) -> ET.Element:
        body = urllib.parse.urlencode({"Action": action, "Version": self.version, **params}).encode()
        headers = signed_headers(self.endpoint, body, self.region, self.service, self._current(), self._clock())
        return ET.fromstring(self._post(self.endpoint, body, headers))
