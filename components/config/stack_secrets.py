"""A stack file names an AWS KMS secrets provider, so Pulumi encrypts the stack's secrets (config and state) with a
key this account controls rather than the backend's default or a passphrase.

Pulumi reads the top-level `secretsprovider:` of `Pulumi.<stack>.yaml` (Pulumi docs, "Stack settings file
reference"); for `awskms://` it wraps a random data key with KMS and, when the file has no `encryptedkey:`
yet, makes one and writes it back (pulumi/pulumi pkg/cmd/pulumi/crypto_cloud.go `newCloudSecretsManager`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from components.findings import Finding

# gocloud.dev's awskms URL: a key ID, ARN or alias, and the key's region (Pulumi docs,
# `pulumi stack change-secrets-provider`: awskms://alias/ExampleAlias?region=us-east-1).
AWS_KMS = re.compile(r"^awskms://(alias/[A-Za-z0-9/_-]+|[0-9a-f-]{36}|arn:aws[a-z-]*:kms:[^?]+)\?region=[a-z0-9-]+$")
RULE = "secrets-provider"


def secrets_provider_problems(path: Path) -> list[Finding]:
    """What is wrong with the stack file's secrets provider (empty: an AWS KMS key in a named region)."""
    document: Any = yaml.safe_load(path.read_text()) or {}
    provider = document.get("secretsprovider") if isinstance(document, dict) else None
    fix = ("put `secretsprovider: awskms://alias/<key alias>?region=<region>` at the top level of the stack file "
           "(docs/operating.md, \"Secrets\")")
    if provider is None:
        return [Finding(rule=RULE, severity="error", path="secretsprovider",
                        message="no secrets provider: Pulumi would encrypt secrets with the backend's default key "
                                "or a passphrase", fix=fix)]
    if not isinstance(provider, str) or not AWS_KMS.match(provider):
        return [Finding(rule=RULE, severity="error", path="secretsprovider", value=provider,
                        message="not an AWS KMS key with its region (awskms://...?region=...)", fix=fix)]
    return []
