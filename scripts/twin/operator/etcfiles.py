"""What each pod's /etc/slurm holds: file name -> where the file's bytes come from (ConfigMap or Secret, name,
key) and its mode, so the twin can write them.

The operator builds /etc/slurm from projected volumes (slurm-operator v1.2.1 controllerbuilder/controller_app.go
controllerVolumes, workerbuilder/worker_app.go nodesetVolumes, restapibuilder/restapi_app.go restapiVolumes,
accountingbuilder/accounting_app.go accountingVolumes) or, for login pods, an emptyDir the initconf container
fills from the slurm-config projection (loginbuilder/login_app.go loginVolumes, common/scripts/initconf.sh:
*.conf and *.key files only). Projection follows Kubernetes: a source with `items` gives those keys at their
paths (item mode, else defaultMode), one without gives every key of the object (data and binaryData) under
its own name, and a later source's file replaces an earlier one's of the same path (the kubelet's projected
volume collects the payload in source order). File modes are the volume's; the kubelet adds group read (and
the fsGroup) where the pod sets fsGroup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.accounting import accounting_volumes
from scripts.twin.operator.controller import controller_volumes
from scripts.twin.operator.login import login_volumes
from scripts.twin.operator.names import accounting_config_name, controller_config_name
from scripts.twin.operator.restapi import restapi_volumes
from scripts.twin.operator.slurmconf import ConfigMaps, controller_config_data
from scripts.twin.operator.worker import nodeset_volumes


@dataclass(frozen=True)
class EtcFile:
    """One file: `kind` "ConfigMap" or "Secret", the object `name` and data `key`, the file `mode`.

    `generated` marks an object the operator writes itself (the Controller's `<name>-config` ConfigMap:
    slurmconf.controller_config_data; the Accounting's `<name>-accounting` Secret: slurmdbd.build_slurmdbd_conf)
    rather than one in the plan.
    """

    kind: str
    name: str
    key: str
    mode: int
    generated: bool = False


def _keys(obj: Mapping[str, Any] | None) -> list[str]:
    obj = obj or {}
    return [*(obj.get("data") or {}), *(obj.get("stringData") or {}), *(obj.get("binaryData") or {})]


def projected_files(
    volume: Mapping[str, Any],
    configmaps: ConfigMaps,
    generated: Mapping[str, Iterable[str]] | None = None,
    secrets: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, EtcFile]:
    """The files a projected volume dict holds. `configmaps`/`secrets` are the plan's objects by name (needed
    for sources without items); `generated` gives the keys of operator-written objects by name."""
    generated = {k: list(v) for k, v in (generated or {}).items()}
    projected = volume.get("projected") or {}
    default_mode = int(projected.get("defaultMode", 0o644))
    files: dict[str, EtcFile] = {}
    for source in projected.get("sources") or ():
        for kind, field, objects in (("ConfigMap", "configMap", configmaps), ("Secret", "secret", secrets or {})):
            ref = source.get(field)
            if ref is None:
                continue
            name = str(ref.get("name") or "")
            is_generated = name in generated
            items = ref.get("items")
            if items:
                for item in items:
                    files[str(item["path"])] = EtcFile(kind, name, str(item["key"]),
                                                       int(item.get("mode", default_mode)), is_generated)
                continue
            if not is_generated and name not in objects:
                raise KeyError(f"projected {kind} {name!r} is not in the plan")
            for key in generated[name] if is_generated else _keys(objects[name]):
                files[key] = EtcFile(kind, name, key, default_mode, is_generated)
    return files


def controller_etc_files(
    controller: Mapping[str, Any],
    nodesets: Iterable[Mapping[str, Any]],
    accounting: Mapping[str, Any] | None,
    configmaps: ConfigMaps,
) -> dict[str, EtcFile]:
    """slurmctld's /etc/slurm: slurm.conf (and cgroup.conf unless a configFileRefs ConfigMap has one) from the
    generated `<name>-config`, slurm.key and jwt.key from their Secrets, every key of each configFileRefs and
    *ScriptRefs ConfigMap (the prolog/epilog scripts too), jwks.json when set; mode 0o610."""
    data = controller_config_data(controller, nodesets, accounting, configmaps)
    volume = controller_volumes(controller)[0]
    return projected_files(volume, configmaps, {controller_config_name(controller): data})


def worker_etc_files(nodeset: Mapping[str, Any], controller: Mapping[str, Any]) -> dict[str, EtcFile]:
    """slurmd's /etc/slurm: slurm.key only (mode 0o600); slurmd gets the rest from slurmctld (configless)."""
    return projected_files(nodeset_volumes(nodeset, controller)[0], {})


def restapi_etc_files(controller: Mapping[str, Any]) -> dict[str, EtcFile]:
    """slurmrestd's /etc/slurm: slurm.conf (from the generated `<controller>-config`) and slurm.key, 0o600."""
    return projected_files(restapi_volumes(controller)[0], {},
                           {controller_config_name(controller): [consts.SLURM_CONF_FILE]})


def accounting_etc_files(accounting: Mapping[str, Any]) -> dict[str, EtcFile]:
    """slurmdbd's /etc/slurm: slurmdbd.conf (the generated `<name>-accounting` Secret), slurm.key, jwt.key
    (jwks.json when set), 0o600."""
    return projected_files(accounting_volumes(accounting)[0], {},
                           {accounting_config_name(accounting): [consts.SLURMDBD_CONF_FILE]})


def login_etc_files(loginset: Mapping[str, Any], controller: Mapping[str, Any]) -> dict[str, EtcFile]:
    """The login container's /etc/slurm: what initconf copies from the slurm-config projection (only *.conf and
    *.key names), owned 401:401, *.conf 0o644, slurmdbd.conf and *.key 0o600 -- in v1.2.1 just slurm.key."""
    volume = next(v for v in login_volumes(loginset, controller) if v["name"] == consts.SLURM_CONFIG_VOLUME)
    out: dict[str, EtcFile] = {}
    for path, f in projected_files(volume, {}).items():
        name = path.rsplit("/", 1)[-1]
        if not (name.endswith(".conf") or name.endswith(".key")):
            continue
        mode = 0o600 if name.endswith(".key") or name == consts.SLURMDBD_CONF_FILE else 0o644
        out[name] = EtcFile(f.kind, f.name, f.key, mode, f.generated)
    return out
