"""slurmdbd.conf as the operator renders it into the Accounting's `<name>-accounting` Secret.

Port of slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_config.go (BuildAccountingConfig,
buildSlurmdbdConf) with internal/defaults/accounting.go (storage port 3306 and database slurm_acct_db when
unset) and BuildMergedConfig from slurmconf.py.

The operator reads StoragePass from the Secret key spec.storageConfig.passwordKeyRef names
(refResolver.GetSecretKeyRef); a plan's Secrets are masked, so the caller passes the password it will give
the twin's database (names.accounting_storage_password_ref says which Secret key it stands for).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.confbuilder import Property, build_config, prop, raw
from scripts.twin.operator.names import accounting_jwks_ref, accounting_primary_name, spec_of
from scripts.twin.operator.slurmconf import build_merged_config


def build_slurmdbd_conf(accounting: Mapping[str, Any], storage_password: str) -> str:
    """slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_config.go buildSlurmdbdConf.

    GENERAL (DbdHost=<name>-accounting-0, DbdPort=6819, SlurmUser=slurm), PLUGINS & PARAMETERS, STORAGE
    (accounting_storage/mysql at spec.storageConfig host/port/username/database, StoragePass=storage_password),
    LOGGING (LogFile=/dev/null), then spec.extraConf under EXTRA CONFIG and the MERGED CONFIG of
    AuthInfo/AuthAltParameters when extraConf sets them.
    """
    spec = spec_of(accounting)
    storage = spec.get("storageConfig") or {}
    alt = [consts.JWT_AUTH_ALT_PARAMETERS]
    if accounting_jwks_ref(accounting) is not None:
        alt.append(consts.JWKS_AUTH_ALT_PARAMETERS)
    merge_config = {"AuthInfo": [consts.AUTH_INFO], "AuthAltParameters": alt}
    lines: list[Property] = [
        raw("#"), raw("### GENERAL ###"),
        prop("DbdHost", accounting_primary_name(accounting)),
        prop("DbdPort", consts.SLURMDBD_PORT),
        prop("SlurmUser", consts.SLURM_USER),
        raw("#"), raw("### PLUGINS & PARAMETERS ###"),
        prop("AuthType", consts.AUTH_TYPE),
        prop("AuthAltTypes", consts.AUTH_ALT_TYPES),
        prop("AuthAltParameters", ",".join(merge_config["AuthAltParameters"])),
        prop("AuthInfo", ",".join(merge_config["AuthInfo"])),
        raw("#"), raw("### STORAGE ###"),
        prop("StorageType", "accounting_storage/mysql"),
        prop("StorageHost", str(storage.get("host") or "")),
        prop("StoragePort", int(storage.get("port") or 0) or consts.DEFAULT_ACCOUNTING_STORAGE_PORT),
        prop("StorageUser", str(storage.get("username") or "")),
        prop("StorageLoc", str(storage.get("database") or "") or consts.DEFAULT_ACCOUNTING_STORAGE_DB),
        prop("StoragePass", storage_password),
        raw("#"), raw("### LOGGING ###"),
        prop("LogFile", consts.DEV_NULL),
    ]
    extra_conf = str(spec.get("extraConf") or "")
    if extra_conf:
        lines += [raw("#"), raw("### EXTRA CONFIG ###"), raw(extra_conf)]
    merged = build_merged_config(extra_conf, merge_config)
    if merged:
        lines += [raw("#"), raw("### MERGED CONFIG ###"), raw(merged)]
    return build_config(lines)
