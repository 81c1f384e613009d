"""A pod's volumes as directories on this machine, and its containers' volumeMounts as bind mounts of them.

Kubernetes' volume kinds (kubernetes.io/docs/concepts/storage/volumes/) the plan's pods use:
- configMap / secret / projected: the object's keys as files (`items` pick keys and paths, `defaultMode` and
  per-item `mode` set the modes); a Secret's values are masked in the plan ("[secret]"), so the twin makes
  its own: `Secrets` holds one value per (secret, key), made once per twin; a projected serviceAccountToken
  becomes a token file;
- emptyDir: an empty directory per pod; hostPath: a directory per pod (each pod is its own node here);
- persistentVolumeClaim: one directory per claim, shared by every pod that mounts it (FSx's /shared is one
  file system for every pod, as in the cluster).
A mount with `subPath` binds that path inside the volume. The pod's securityContext.fsGroup owns the volume
directories (group-writable), as the kubelet does for volumes that support ownership management.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scripts.offline.plan_model import SECRET
from scripts.twin.errors import TwinError
from scripts.twin.operator.model import PodPlan, VolumeMount
from scripts.twin.pods import Mount

DEFAULT_MODE = 0o644  # ConfigMapVolumeSource/SecretVolumeSource defaultMode


class Secrets:
    """Values for the plan's masked Secret keys, made once per twin and kept in its state directory.

    `makers` give a value for a key by its name (slurm.key: 1024 random bytes, as the chart's; jwt.key too);
    anything else gets 32 random hex characters.
    """

    def __init__(self, directory: Path, objects: Mapping[str, Mapping[str, Any]],
                 makers: Mapping[str, Callable[[], bytes]]) -> None:
        self.directory = directory
        self.objects = objects
        self.makers = makers

    def value(self, secret: str, key: str) -> bytes:
        path = self.directory / secret / key
        if path.exists():
            return path.read_bytes()
        obj = self.objects.get(secret)
        if obj is None:
            raise TwinError(f"a pod mounts Secret {secret!r}, which the plan does not have")
        plain = {**(obj.get("stringData") or {}), **(obj.get("data") or {})}.get(key)
        if plain is not None and plain != SECRET:
            value = plain.encode() if isinstance(plain, str) else bytes(plain)
        else:
            value = self.makers.get(key, lambda: secrets.token_hex(16).encode())()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value)
        path.chmod(0o600)
        return value

    def keys(self, secret: str) -> list[str]:
        obj = self.objects.get(secret) or {}
        return sorted({*(obj.get("stringData") or {}), *(obj.get("data") or {})})


# With fsGroup, the kubelet gives a read-only volume's files to that group and ORs their mode with r--r-----
# (kubernetes/kubernetes pkg/volume/volume_linux.go changeFilePermission: roMask 0440).
FS_GROUP_READ = 0o440


def _write(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode | FS_GROUP_READ if owner else mode)
    if owner:
        os.chown(path, *owner)


class Volumes:
    """Realises the volumes of one pod under `root` (one directory per volume)."""

    def __init__(self, root: Path, config_maps: Mapping[str, Mapping[str, Any]], secrets_: Secrets,
                 claims: Callable[[str], Path]) -> None:
        self.root = root
        self.config_maps = config_maps
        self.secrets = secrets_
        self.claims = claims
        self.paths: dict[str, Path] = {}

    def _keys(self, source: Mapping[str, Any], kind: str) -> list[tuple[str, str, int | None]]:
        """(key, path in the volume, mode) for each file of a configMap/secret source."""
        name = source.get("name") or source.get("secretName")
        if kind == "configMap":
            data = (self.config_maps.get(name) or {}).get("data")
            if data is None and not source.get("optional"):
                raise TwinError(f"a pod mounts ConfigMap {name!r}, which the plan does not have")
            keys = sorted(data or {})
        else:
            keys = self.secrets.keys(name)
        items = source.get("items")
        if items:
            return [(i["key"], i["path"], i.get("mode")) for i in items]
        return [(k, k, None) for k in keys]

    def _files(self, directory: Path, source: Mapping[str, Any], kind: str, default_mode: int,
               owner: tuple[int, int] | None) -> None:
        name = source.get("name") or source.get("secretName")
        for key, path, mode in self._keys(source, kind):
            if kind == "configMap":
                text = (self.config_maps.get(name) or {}).get("data", {}).get(key)
                if text is None:
                    raise TwinError(f"ConfigMap {name} has no key {key!r}")
                data = text.encode()
            else:
                data = self.secrets.value(name, key)
            _write(directory / path, data, mode if mode is not None else default_mode, owner)

    def realise(self, pod: PodPlan) -> None:
        fs_group = pod.security_context.get("fsGroup")
        owner = (0, int(fs_group)) if fs_group is not None else None
        for volume in pod.volumes:
            kind, source = volume.kind, volume.source[volume.kind] or {}
            if kind == "persistentVolumeClaim":
                self.paths[volume.name] = self.claims(source["claimName"])
                continue
            directory = self.root / volume.name
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            if kind in ("configMap", "secret"):
                self._files(directory, source, kind, source.get("defaultMode", DEFAULT_MODE), owner)
            elif kind == "projected":
                for part in source.get("sources") or []:
                    for sub in ("configMap", "secret"):
                        if sub in part:
                            self._files(directory, part[sub], sub, source.get("defaultMode", DEFAULT_MODE), owner)
                    if "serviceAccountToken" in part:  # the kubelet's token for the audience; the twin's AWS
                        token = part["serviceAccountToken"]  # (scripts/twin/aws.py) takes any token
                        _write(directory / token["path"], f"twin: {pod.name} for {token.get('audience', '')}\n"
                               .encode(), source.get("defaultMode", DEFAULT_MODE), owner)
            elif kind not in ("emptyDir", "hostPath"):
                raise TwinError(f"pod {pod.name}: volume {volume.name} is a {kind}, which the twin cannot make")
            if kind in ("emptyDir", "hostPath"):
                # The kubelet makes an emptyDir 0777 (pkg/volume/emptydir/empty_dir.go perm), group fsGroup.
                directory.chmod(0o2777 if owner else 0o777)
            if owner:
                os.chown(directory, 0, owner[1])
            self.paths[volume.name] = directory

    def refresh(self, pod: PodPlan, config_map: str) -> bool:
        """Rewrite the files of `pod`'s volumes of ConfigMap `config_map` from its current data, each file by a
        rename into place (a running container sees the new file at once); whether the pod has such a volume."""
        fs_group = pod.security_context.get("fsGroup")
        owner = (0, int(fs_group)) if fs_group is not None else None
        found = False
        for volume in pod.volumes:
            source = volume.source[volume.kind] or {}
            if volume.kind != "configMap" or source.get("name") != config_map:
                continue
            found = True
            directory = self.root / volume.name
            staging = self.root / f".{volume.name}.new"
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            self._files(staging, source, "configMap", source.get("defaultMode", DEFAULT_MODE), owner)
            for new in staging.rglob("*"):
                if new.is_file():
                    target = directory / new.relative_to(staging)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(new, target)
            shutil.rmtree(staging, ignore_errors=True)
        return found

    def mounts(self, volume_mounts: tuple[VolumeMount, ...]) -> list[Mount]:
        out = []
        for m in volume_mounts:
            if m.name not in self.paths:
                raise TwinError(f"a container mounts volume {m.name!r}, which its pod does not have")
            # A subPath an init container has yet to write is looked up when the container starts (pod_init.bind).
            source = self.paths[m.name] / m.sub_path if m.sub_path else self.paths[m.name]
            out.append(Mount(str(source), m.mount_path, m.read_only))
        return out
