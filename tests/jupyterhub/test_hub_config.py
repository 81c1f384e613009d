"""The hub's configuration as zero-to-jupyterhub 4.4.0's hub builds it from our chart values, loaded with the
real jupyterhub and jupyterhub-kubespawner (the versions its hub image runs): three profiles with their pools'
node selectors, tolerations and devices, and /shared plus the models mounted."""

from __future__ import annotations

import asyncio
import copy
import pprint
from pathlib import Path
from typing import Any

import pytest

from components.addons.jupyterhub import chart_values
from components.compute.nodepools import POOL_LABEL
from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from components.names import SHARED_MOUNT, SHARED_PVC
from tests.config.helpers import raw_config
from tests.conftest import require_module

require_module("jupyterhub", "the dev extra")
kubespawner = require_module("kubespawner", "the dev extra (jupyterhub-kubespawner)")
traitlets_config = require_module("traitlets.config", "jupyterhub's dependency")


def hub_config_py(values: dict[str, Any]) -> str:
    """The part of z2jh's hub config (jupyterhub/files/hub/jupyterhub_config.py at 4.4.0) that reads the values we
    set: singleuser.profileList -> KubeSpawner.profile_list; storage.extraVolumes/extraVolumeMounts (lists) ->
    volumes/volume_mounts keyed by name / index-name; singleuser.extraEnv -> environment; hub.config.<Class>
    passed through; hub.extraConfig executed in key order."""
    su, hub = values["singleuser"], values["hub"]
    volumes = {v["name"]: v for v in su["storage"]["extraVolumes"]}
    mounts = {f"{i}-{m['name']}": m for i, m in enumerate(su["storage"]["extraVolumeMounts"])}
    lines = ["c = get_config()  # noqa",
             "c.JupyterHub.spawner_class = 'kubespawner.KubeSpawner'",
             f"c.KubeSpawner.profile_list = {su['profileList']!r}",
             f"c.KubeSpawner.volumes = {volumes!r}",
             f"c.KubeSpawner.volume_mounts = {mounts!r}",
             f"c.KubeSpawner.environment = {su['extraEnv']!r}",
             f"c.KubeSpawner.image = {su['image']['name'] + ':' + su['image']['tag']!r}"]
    for section, traits in hub["config"].items():
        lines += [f"c.{section}.{k} = {v!r}" for k, v in traits.items()]
    for _, code in sorted(hub["extraConfig"].items()):
        lines.append(code)
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KubeSpawner loads a kubeconfig when made (clients.py load_config); it never calls the cluster here."""
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters: [{name: t, cluster: {server: "
                    "'https://127.0.0.1:1'}}]\ncontexts: [{name: t, context: {cluster: t, user: t}}]\n"
                    "users: [{name: t, user: {token: x}}]\n")
    monkeypatch.setattr("kubernetes_asyncio.config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture(scope="module")
def prod() -> ClusterConfig:
    return parse_cluster_config(raw_config("prod"), "prod")[0]


def load(config: ClusterConfig, tmp_path: Path) -> Any:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(hub_config_py(chart_values(config, config.addons.jupyterhub)))
    return traitlets_config.PyFileConfigLoader(path.name, str(tmp_path)).load_config()


class User:
    name = "alice"
    escaped_name = "alice"
    id = 1
    url = "/user/alice/"

    def __init__(self) -> None:
        self.spawners: dict[str, Any] = {}


def spawn(cfg: Any, slug: str) -> Any:
    """A KubeSpawner as the hub makes one (no cluster: _mock) with the profile applied as on the spawn form."""
    async def make() -> Any:  # KubeSpawner starts its API client on the running loop
        spawner = kubespawner.KubeSpawner(config=cfg, user=User(), _mock=True)
        spawner._load_profile(slug, spawner.profile_list)
        return spawner
    return asyncio.run(make())


def test_three_profiles_with_pools_devices_and_volumes(prod: ClusterConfig, tmp_path: Path) -> None:
    cfg = load(prod, tmp_path)
    assert [p["slug"] for p in cfg.KubeSpawner.profile_list] == ["gpu-1", "gpu-8", "trainium-16"]
    expected = {"gpu-1": ("ml-a10g", "nvidia.com/gpu", "1"), "gpu-8": ("ml-h100", "nvidia.com/gpu", "8"),
                "trainium-16": ("ml-trn1", "aws.amazon.com/neuron", "16")}
    for slug, (pool, resource, count) in expected.items():
        s = spawn(cfg, slug)
        assert s.node_selector == {POOL_LABEL: pool}, slug
        assert {"key": POOL_LABEL, "operator": "Equal", "value": pool, "effect": "NoSchedule"} in s.tolerations
        assert {t["key"] for t in s.tolerations} >= {POOL_LABEL, resource}
        assert s.extra_resource_limits == {resource: count}
        assert s.cpu_guarantee and s.mem_guarantee
        claims = {v["persistentVolumeClaim"]["claimName"] for v in s.volumes.values()}
        assert claims == {SHARED_PVC, "efs-models"}
        paths = {m["mountPath"]: m.get("readOnly", False) for m in s.volume_mounts.values()}
        assert paths == {SHARED_MOUNT: False, prod.storage.efs.mount_path: True}
        assert s.container_security_context["capabilities"] == {"drop": ["ALL"]}
    gpu1 = spawn(cfg, "gpu-1")
    assert gpu1.cpu_limit < 4 and gpu1.uid(gpu1) == 20001  # a fraction of a g5.xlarge; alice's own UID


def test_the_authenticator_is_the_oidc_one_admitting_declared_users(prod: ClusterConfig, tmp_path: Path) -> None:
    from jupyterhub.app import JupyterHub
    cfg = load(prod, tmp_path)
    app = JupyterHub(config=cfg)
    authenticator = app.authenticator_class(config=cfg)
    assert type(authenticator).__name__ == "GenericOAuthenticator"
    assert authenticator.allowed_users == {"alice", "bob", "carol"}


def test_a_broken_profile_is_seen(prod: ClusterConfig, tmp_path: Path) -> None:
    """The check fires: a profile whose override lost its node selector lands nowhere near its pool."""
    values = chart_values(prod, prod.addons.jupyterhub)
    broken = copy.deepcopy(values)
    del broken["singleuser"]["profileList"][2]["kubespawner_override"]["node_selector"]
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(hub_config_py(broken))
    cfg = traitlets_config.PyFileConfigLoader(path.name, str(tmp_path)).load_config()
    assert spawn(cfg, "trainium-16").node_selector != {POOL_LABEL: "ml-trn1"}, pprint.pformat(broken)
