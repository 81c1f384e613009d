"""The record of what `pulumi up` applied, left as the stack output `deployedConfig`: the stack config (it holds
no secret values, only references to secrets), its digest, and the digest of the offline plan the gates checked
(`slurm-eks up` hands it over in SLURM_EKS_PLAN_DIGEST). scripts/change/ reads it back to judge the next change."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from components.config.cluster import ClusterConfig

OUTPUT = "deployedConfig"
PLAN_DIGEST_ENV = "SLURM_EKS_PLAN_DIGEST"
FORMAT = 1


def record(config: ClusterConfig, stack: str) -> dict[str, Any]:
    dumped = config.model_dump(by_alias=True, mode="json")
    digest = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()
    return {"format": FORMAT, "stack": stack, "config": dumped, "configDigest": digest,
            "planDigest": os.environ.get(PLAN_DIGEST_ENV) or None}
