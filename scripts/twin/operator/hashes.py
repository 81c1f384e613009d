"""The hash annotations the operator puts on pod templates so that a changed Secret or config rolls the pods.

Ports of slurm-operator v1.2.1 internal/utils/crypto/hash.go (CheckSum, CheckSumFromMap) and the builders'
getHashes/getAuthHashes (controllerbuilder/controller_app.go, accountingbuilder/accounting_app.go),
getLoginHashes (loginbuilder/login_app.go) and getWorkerHashes (workerbuilder/worker_app.go). A missing object
hashes as empty data. Secret values are the decoded bytes (or str, taken as UTF-8).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from scripts.twin.operator import consts

Data = Mapping[str, str | bytes]


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)


def checksum(data: str | bytes) -> str:
    """slurm-operator v1.2.1 internal/utils/crypto/hash.go CheckSum: the SHA-256 hex digest."""
    return hashlib.sha256(_bytes(data)).hexdigest()


def checksum_from_map(items: Data | None) -> str:
    """slurm-operator v1.2.1 internal/utils/crypto/hash.go CheckSumFromMap: the digest of the values
    concatenated in key order, or "" when they are all empty."""
    joined = b"".join(_bytes((items or {})[k]) for k in sorted(items or {}))
    return checksum(joined) if joined else ""


def auth_hash_annotations(slurm_key_secret: Data | None, jwt_key_secret: Data | None) -> dict[str, str]:
    """getAuthHashes (Controller and Accounting): the whole data of the slurm-key and jwt-key Secrets."""
    return {consts.ANNOTATION_AUTH_SLURM_KEY_HASH: checksum_from_map(slurm_key_secret),
            consts.ANNOTATION_AUTH_JWT_KEY_HASH: checksum_from_map(jwt_key_secret)}


def controller_hash_annotations(
    inplace_reconfigure: bool, slurm_key_secret: Data | None, jwt_key_secret: Data | None, config_data: Data | None
) -> dict[str, str]:
    """controllerPodTemplate: the auth hashes, plus slurm-config-hash of the `<name>-config` ConfigMap's data
    unless spec.inplaceReconfigure (then a config change is applied by `scontrol reconfigure`, not a restart)."""
    out = auth_hash_annotations(slurm_key_secret, jwt_key_secret)
    if not inplace_reconfigure:
        out[consts.ANNOTATION_SLURM_CONFIG_HASH] = checksum_from_map(config_data)
    return out


def accounting_hash_annotations(
    slurm_key_secret: Data | None, jwt_key_secret: Data | None, slurmdbd_conf_secret: Data | None
) -> dict[str, str]:
    """accountingPodTemplate getHashes: the auth hashes and slurmdbd-conf-hash of the `<name>-accounting`
    Secret's data."""
    return {**auth_hash_annotations(slurm_key_secret, jwt_key_secret),
            consts.ANNOTATION_SLURMDBD_CONF_HASH: checksum_from_map(slurmdbd_conf_secret)}


def login_hash_annotations(ssh_host_keys: Data | None, sshd_config: str | None, sssd_conf: str | bytes | None
                           ) -> dict[str, str]:
    """getLoginHashes: ssh-host-keys-hash (the generated host-key Secret), sshd-conf-hash (its sshd_config) and
    sssd-conf-hash (the sssdConfRef key)."""
    return {consts.ANNOTATION_SSH_HOST_KEYS_HASH: checksum_from_map(ssh_host_keys),
            consts.ANNOTATION_SSHD_CONF_HASH: checksum(sshd_config or b""),
            consts.ANNOTATION_SSSD_CONF_HASH: checksum(sssd_conf or b"")}


def worker_hash_annotations(sshd_config: str | None, sssd_conf: str | bytes | None) -> dict[str, str]:
    """getWorkerHashes: sshd-conf-hash and sssd-conf-hash (digests of empty data when SSH is off)."""
    return {consts.ANNOTATION_SSHD_CONF_HASH: checksum(sshd_config or b""),
            consts.ANNOTATION_SSSD_CONF_HASH: checksum(sssd_conf or b"")}
