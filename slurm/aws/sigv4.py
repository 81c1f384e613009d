"""Signature Version 4 for a POST of a form-encoded Query API request
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html); tests check each
signature against botocore's SigV4Auth."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
FORM = "application/x-www-form-urlencoded; charset=utf-8"


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None = None
    expires: datetime | None = None


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signed_headers(url: str, body: bytes, region: str, service: str, credentials: Credentials,
                   now: datetime) -> dict[str, str]:
    """The headers of a signed POST of `body` to `url` at `now` (UTC)."""
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    parts = urlsplit(url)
    headers = {"content-type": FORM, "host": parts.netloc, "x-amz-date": stamp}
    if credentials.token:
        headers["x-amz-security-token"] = credentials.token
    names = sorted(headers)
    canonical = "\n".join(["POST", parts.path or "/", parts.query,
                           "".join(f"{n}:{headers[n].strip()}\n" for n in names), ";".join(names),
                           hashlib.sha256(body).hexdigest()])
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{credentials.secret_key}".encode(), stamp[:8]), region), service),
                "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return headers
