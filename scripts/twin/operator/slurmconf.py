"""slurm.conf and cgroup.conf exactly as the operator renders them into the Controller's `<name>-config`
ConfigMap.

Ports of slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go (BuildControllerConfig,
buildSlurmConf, buildPrologEpilogSlurmctldConf, buildPrologEpilogConf, buildNodeSetConf, buildCgroupConf,
isCgroupEnabled, BuildControllerConfigExternal/buildSlurmConfMinimal) and internal/builder/common/common.go
(BuildMergedConfig, parseSlurmConfKV, parseKVKey, GetSlurmNodeSetName via names.slurm_nodeset_name), with
internal/utils/refresolver/refresolver.go GetNodeSetsForController choosing the NodeSets.

Inputs are the plan's dicts: the Controller, every NodeSet (those of other controllers or namespaces are
ignored here, as GetNodeSetsForController does), the Accounting the Controller's accountingRef names (or
None), and the ConfigMaps by name (those the script and config-file refs name must be there: the operator
fails its reconcile otherwise).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.confbuilder import Property, build_config, prop, raw
from scripts.twin.operator.names import (
    accounting_service_name,
    cluster_spool_dir,
    controller_cluster_name,
    controller_jwks_ref,
    controller_primary_name,
    controller_service_fqdn_short,
    name_of,
    namespace_of,
    nodeset_controller_name,
    ref_name,
    slurm_nodeset_name,
    spec_of,
)

ConfigMaps = Mapping[str, Mapping[str, Any]]

SCRIPT_REF_FIELDS = ("prologScriptRefs", "epilogScriptRefs", "prologSlurmctldScriptRefs",
                     "epilogSlurmctldScriptRefs")


# --- merged parameters (common.go) ---------------------------------------------------------------------------


def parse_kv_key(s: str) -> str:
    """slurm-operator v1.2.1 internal/builder/common/common.go parseKVKey: the lower-cased text before '='."""
    return s.split("=", 1)[0].lower()


def parse_slurm_conf_kv(conf: str) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/common/common.go parseSlurmConfKV.

    Lower-cased key -> value of each `key=value` logical line: '#' starts a comment, a trailing '\\' joins the
    next line, the last duplicate wins, and a line whose value is empty or holds a space or newline (e.g. a
    NodeName line) is skipped.
    """
    out: dict[str, str] = {}
    buf: list[str] = []

    def set_kv(logical: str) -> None:
        logical = logical.strip()
        if not logical or "=" not in logical:
            return
        key, val = logical.split("=", 1)
        key, val = key.strip(), val.strip()
        if not key or not val or " " in val or "\n" in val:
            return
        out[key.lower()] = val

    for line in conf.split("\n"):
        line = line.removesuffix("\r")
        if "#" in line:
            line = line[: line.index("#")]
        line = line.rstrip(" \t")
        if not line:
            continue
        if line.endswith("\\"):
            buf.append(line[:-1])
            continue
        buf.append(line)
        set_kv("".join(buf))
        buf = []
    if buf:
        set_kv("".join(buf))
    return out


def build_merged_config(conf: str, merge_config: Mapping[str, Iterable[str]]) -> str:
    """slurm-operator v1.2.1 internal/builder/common/common.go BuildMergedConfig.

    For each parameter of `merge_config` (in sorted order) that `conf` also sets: the union of the operator's
    options and the user's (lower-cased) options, a user option dropped when its key (before '=') is one the
    operator already sets, sorted. Returns "" when `conf` sets none of them.
    """
    lines: list[Property] = []
    values = parse_slurm_conf_kv(conf)
    for param in sorted(merge_config):
        val = values.get(param.lower())
        if val is None:
            continue
        merged = set(merge_config[param])
        seen = {parse_kv_key(v) for v in merged}
        for v in val.split(","):
            if not v:
                continue
            key = parse_kv_key(v)
            if key in seen:
                continue
            merged.add(v.lower())
            seen.add(key)
        lines.append(prop(param, ",".join(sorted(merged))))
    return build_config(lines, final_newline=False)


# --- sections (controller_config.go) -------------------------------------------------------------------------


def build_prolog_epilog_slurmctld_conf(prolog_slurmctld: Iterable[str], epilog_slurmctld: Iterable[str]) -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go
    buildPrologEpilogSlurmctldConf: `PrologSlurmctld=/etc/slurm/<file>` then `EpilogSlurmctld=...`, each
    sorted (absolute paths: slurmctld runs them from its own /etc/slurm)."""
    def etc(name: str) -> str:  # Go path.Join(SlurmEtcDir, name)
        return posixpath.normpath(f"{consts.SLURM_ETC_DIR}/{name}")

    lines = [prop("PrologSlurmctld", etc(f)) for f in sorted(prolog_slurmctld)]
    lines += [prop("EpilogSlurmctld", etc(f)) for f in sorted(epilog_slurmctld)]
    return build_config(lines, final_newline=False)


def build_prolog_epilog_conf(prolog: Iterable[str], epilog: Iterable[str]) -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go buildPrologEpilogConf:
    `Prolog=<file>` then `Epilog=<file>`, each sorted, with the bare file name (a relative path: configless
    slurmd fetches the scripts from slurmctld)."""
    lines = [prop("Prolog", f) for f in sorted(prolog)] + [prop("Epilog", f) for f in sorted(epilog)]
    return build_config(lines, final_newline=False)


def build_nodeset_conf(nodesets: Iterable[Mapping[str, Any]]) -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go buildNodeSetConf.

    NodeSets sorted by object name; for each, `NodeSet=<n> Feature=<n>` (n = names.slurm_nodeset_name) and,
    when spec.partition.enabled, `PartitionName=<n> Nodes=<n> <spec.partition.config>` (a trailing space when
    the config is empty).
    """
    lines: list[Property] = []
    for nodeset in sorted(nodesets, key=name_of):
        name = slurm_nodeset_name(nodeset)
        lines.append(raw(f"NodeSet={name} Feature={name}"))
        partition = spec_of(nodeset).get("partition") or {}
        if not partition.get("enabled"):
            continue
        lines.append(raw(" ".join([f"PartitionName={name}", f"Nodes={name}", str(partition.get("config") or "")])))
    return build_config(lines, final_newline=False)


def build_cgroup_conf() -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go buildCgroupConf:
    "CgroupPlugin=cgroup/v2\\nIgnoreSystemd=yes\\n"."""
    return build_config([prop("CgroupPlugin", "cgroup/v2"), prop("IgnoreSystemd", "yes")])


def is_cgroup_enabled(cgroup_conf: str) -> bool:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go isCgroupEnabled: false when
    a line starts with `CgroupPlugin=disabled` (any case)."""
    return re.search(r"(?im)^CgroupPlugin=disabled", cgroup_conf) is None


def _merge_config(jwks: bool) -> dict[str, list[str]]:
    params = [consts.JWT_AUTH_ALT_PARAMETERS]
    if jwks:
        params.append(consts.JWKS_AUTH_ALT_PARAMETERS)
    return {
        "SlurmctldParameters": ["enable_configless", "reconfig_on_restart"],
        "AuthInfo": [consts.AUTH_INFO],
        "AuthAltParameters": params,
    }


def build_slurm_conf(
    controller: Mapping[str, Any],
    accounting: Mapping[str, Any] | None,
    nodesets: Iterable[Mapping[str, Any]],
    prolog_scripts: Iterable[str] = (),
    epilog_scripts: Iterable[str] = (),
    prolog_slurmctld_scripts: Iterable[str] = (),
    epilog_slurmctld_scripts: Iterable[str] = (),
) -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go buildSlurmConf.

    The script lists are file names (the keys of the referenced ConfigMaps); `nodesets` are the Controller's
    (see nodesets_for_controller). The sections: GENERAL, LOGGING, PLUGINS & PARAMETERS (MetricsType when
    spec.metrics.enabled), ACCOUNTING, then when non-empty SLURMCTLD PROLOG & EPILOG, PROLOG & EPILOG,
    NODESET & PARTITION, EXTRA CONFIG (spec.extraConf verbatim) and MERGED CONFIG.
    """
    spec = spec_of(controller)
    merge_config = _merge_config(controller_jwks_ref(controller) is not None)
    cluster = controller_cluster_name(controller)
    lines: list[Property] = [
        raw("#"), raw("### GENERAL ###"),
        prop("ClusterName", cluster),
        prop("SlurmUser", consts.SLURM_USER),
        prop("SlurmctldHost", f"{controller_primary_name(controller)}({controller_service_fqdn_short(controller)})"),
        prop("SlurmctldPort", consts.SLURMCTLD_PORT),
        prop("StateSaveLocation", cluster_spool_dir(cluster)),
        prop("SlurmdUser", consts.SLURMD_USER),
        prop("SlurmdPort", consts.SLURMD_PORT),
        prop("SlurmdSpoolDir", consts.SLURMD_SPOOL_DIR),
        prop("MaxNodeCount", 1024),
        raw("#"), raw("### LOGGING ###"),
        prop("SlurmctldLogFile", consts.SLURMCTLD_LOGFILE_PATH),
        prop("SlurmSchedLogFile", consts.SLURMCTLD_LOGFILE_PATH),
        prop("SlurmdLogFile", consts.SLURMD_LOGFILE_PATH),
        raw("#"), raw("### PLUGINS & PARAMETERS ###"),
        prop("AuthType", consts.AUTH_TYPE),
        prop("CredType", consts.CRED_TYPE),
        prop("AuthAltTypes", consts.AUTH_ALT_TYPES),
        prop("AuthAltParameters", ",".join(merge_config["AuthAltParameters"])),
        prop("AuthInfo", ",".join(merge_config["AuthInfo"])),
        prop("SlurmctldParameters", ",".join(merge_config["SlurmctldParameters"])),
    ]
    if (spec.get("metrics") or {}).get("enabled"):
        lines.append(prop("MetricsType", "metrics/openmetrics"))
    lines += [raw("#"), raw("### ACCOUNTING ###"), *_accounting_lines(accounting)]

    sections = [
        ("### SLURMCTLD PROLOG & EPILOG ###",
         build_prolog_epilog_slurmctld_conf(prolog_slurmctld_scripts, epilog_slurmctld_scripts)),
        ("### PROLOG & EPILOG ###", build_prolog_epilog_conf(prolog_scripts, epilog_scripts)),
        ("### NODESET & PARTITION ###", build_nodeset_conf(nodesets)),
    ]
    extra_conf = str(spec.get("extraConf") or "")
    sections.append(("### EXTRA CONFIG ###", extra_conf))
    sections.append(("### MERGED CONFIG ###", build_merged_config(extra_conf, merge_config)))
    for header, snippet in sections:
        if snippet:
            lines += [raw("#"), raw(header), raw(snippet)]
    return build_config(lines)


def _accounting_lines(accounting: Mapping[str, Any] | None) -> list[Property]:
    if accounting is None:
        return [prop("AccountingStorageType", "accounting_storage/none")]
    return [
        prop("AccountingStorageType", "accounting_storage/slurmdbd"),
        prop("AccountingStorageHost", accounting_service_name(accounting)),
        prop("AccountingStoragePort", consts.SLURMDBD_PORT),
    ]


def build_slurm_conf_minimal(controller: Mapping[str, Any], accounting: Mapping[str, Any] | None) -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go buildSlurmConfMinimal: the
    slurm.conf written for an external controller (spec.external) instead of buildSlurmConf."""
    lines = [
        raw("#"), raw("### GENERAL ###"),
        prop("ClusterName", controller_cluster_name(controller)),
        prop("SlurmUser", consts.SLURM_USER),
        prop("SlurmctldHost", controller_primary_name(controller)),
        prop("SlurmctldPort", consts.SLURMCTLD_PORT),
        raw("#"), raw("### PLUGINS & PARAMETERS ###"),
        prop("AuthType", consts.AUTH_TYPE),
        prop("CredType", consts.CRED_TYPE),
        prop("AuthAltTypes", consts.AUTH_ALT_TYPES),
        raw("#"), raw("### ACCOUNTING ###"),
        *_accounting_lines(accounting),
    ]
    return build_config(lines)


# --- inputs from the plan ------------------------------------------------------------------------------------


def nodesets_for_controller(controller: Mapping[str, Any], nodesets: Iterable[Mapping[str, Any]]) -> list[dict]:
    """slurm-operator v1.2.1 internal/utils/refresolver/refresolver.go GetNodeSetsForController: the NodeSets
    in the Controller's namespace whose spec.controllerRef.name is the Controller's name."""
    return [dict(n) for n in nodesets
            if namespace_of(n) == namespace_of(controller) and nodeset_controller_name(n) == name_of(controller)]


def referenced_configmap(configmaps: ConfigMaps, name: str, controller: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ConfigMap a Controller ref names; KeyError (the operator's reconcile fails: client.Get NotFound)."""
    try:
        return configmaps[name]
    except KeyError:
        raise KeyError(f"Controller {name_of(controller)} references ConfigMap {name!r}, which is not in the plan "
                       "(the operator's BuildControllerConfig fails on it)") from None


def script_names(controller: Mapping[str, Any], configmaps: ConfigMaps, field: str) -> list[str]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go BuildControllerConfig: the
    data keys of each ConfigMap in spec.<field> (a *ScriptRefs list), sorted per ConfigMap, in ref order."""
    out: list[str] = []
    for ref in spec_of(controller).get(field) or ():
        cm = referenced_configmap(configmaps, ref_name(ref), controller)
        out += sorted((cm.get("data") or {}).keys())
    return out


def has_cgroup_conf_file(controller: Mapping[str, Any], configmaps: ConfigMaps) -> bool:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go BuildControllerConfig:
    whether a configFileRefs ConfigMap has a cgroup.conf data key (then the operator writes none)."""
    return any(consts.CGROUP_CONF_FILE in (referenced_configmap(configmaps, ref_name(ref), controller).get("data")
                                           or {})
               for ref in spec_of(controller).get("configFileRefs") or ())


def controller_config_data(
    controller: Mapping[str, Any],
    nodesets: Iterable[Mapping[str, Any]],
    accounting: Mapping[str, Any] | None,
    configmaps: ConfigMaps,
) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go BuildControllerConfig (and
    BuildControllerConfigExternal for spec.external): the data of the `<name>-config` ConfigMap.

    {"slurm.conf": ..., "cgroup.conf": ...}; cgroup.conf only when no configFileRefs ConfigMap has one.
    `nodesets` may hold every NodeSet of the plan: those of this Controller are picked. `accounting` is the
    Accounting named by spec.accountingRef (None when there is no ref or, as the operator tolerates, the
    Accounting does not exist).
    """
    if spec_of(controller).get("external"):
        return {consts.SLURM_CONF_FILE: build_slurm_conf_minimal(controller, accounting)}
    for ref in spec_of(controller).get("configFileRefs") or ():
        referenced_configmap(configmaps, ref_name(ref), controller)
    data = {consts.SLURM_CONF_FILE: build_slurm_conf(
        controller, accounting, nodesets_for_controller(controller, nodesets),
        *(script_names(controller, configmaps, f) for f in SCRIPT_REF_FIELDS))}
    if not has_cgroup_conf_file(controller, configmaps):
        data[consts.CGROUP_CONF_FILE] = build_cgroup_conf()
    return data


def controller_slurm_conf(
    controller: Mapping[str, Any],
    nodesets: Iterable[Mapping[str, Any]],
    accounting: Mapping[str, Any] | None,
    configmaps: ConfigMaps,
) -> str:
    """slurm.conf as the operator writes it for this Controller (see controller_config_data)."""
    return controller_config_data(controller, nodesets, accounting, configmaps)[consts.SLURM_CONF_FILE]


def accounting_for_controller(controller: Mapping[str, Any],
                              accountings: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_config.go BuildControllerConfig
    (refResolver.GetAccounting): the Accounting named by spec.accountingRef in the Controller's namespace, or
    None when there is no ref or no such object."""
    ref = spec_of(controller).get("accountingRef")
    if not ref:
        return None
    for acc in accountings:
        if name_of(acc) == ref_name(ref) and namespace_of(acc) == namespace_of(controller):
            return acc
    return None
