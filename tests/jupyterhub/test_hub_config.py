"""The hub's configuration as zero-to-jupyterhub 4.4.0's hub builds it from our chart values, loaded with the
real jupyterhub and jupyterhub-kubespawner (the versions its hub image runs): three profiles with their pools'
node selectors, tolerations and devices, and /shared plus the models mounted."""

from __future__ import annotations

import asyncio
import copy
import pprint
import ssl
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
ldap3 = require_module("ldap3", "the dev extra (jupyterhub-ldapauthenticator)")


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
    id = 1

    def __init__(self, name: str = "alice", auth_state: dict[str, Any] | None = None) -> None:
        self.name = self.escaped_name = name
        self.url = f"/user/{name}/"
        self.spawners: dict[str, Any] = {}
        self.auth_state = auth_state

    async def get_auth_state(self) -> dict[str, Any] | None:  # jupyterhub.user.User's, decrypted
        return self.auth_state


def spawn(cfg: Any, slug: str, user: User | None = None) -> Any:
    """A KubeSpawner as the hub makes one (no cluster: _mock) with the profile applied as on the spawn form, and the
    hub's pre-spawn hook run on it as Spawner.run_pre_spawn_hook does before every start."""
    async def make() -> Any:  # KubeSpawner starts its API client on the running loop
        spawner = kubespawner.KubeSpawner(config=cfg, user=user or User(), _mock=True)
        spawner._load_profile(slug, spawner.profile_list)
        await spawner.run_pre_spawn_hook()
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
    assert gpu1.cpu_limit < 4 and (gpu1.uid, gpu1.gid) == (20001, 30001)  # a fraction of a g5.xlarge; alice's own IDs


def authenticator(cfg: Any) -> Any:
    from jupyterhub.app import JupyterHub
    return JupyterHub(config=cfg).authenticator_class(config=cfg)


def test_the_authenticator_is_the_oidc_one_admitting_declared_users(prod: ClusterConfig, tmp_path: Path) -> None:
    hub = authenticator(load(prod, tmp_path))
    assert type(hub).__name__ == "GenericOAuthenticator"
    assert hub.allowed_users == {"alice", "bob", "carol"}


def test_a_person_is_who_their_stable_subject_says_never_a_name_they_can_edit(prod: ClusterConfig,
                                                                             tmp_path: Path) -> None:
    """The defect: with username_claim preferred_username, bob renaming himself "alice" at the provider signed in
    as alice and got her UID on /shared. Now the subject decides, through oauthenticator 17.4.0's own
    user_info_to_username."""
    hub = authenticator(load(prod, tmp_path))
    alice = {"sub": "00u1alice0example0001", "preferred_username": "alice", "groups": ["ml-researchers"]}
    assert hub.user_info_to_username(alice) == "alice"
    bob_as_alice = {"sub": "00u1bob000example0002", "preferred_username": "alice", "groups": ["ml-researchers"]}
    assert hub.user_info_to_username(bob_as_alice) == "bob"
    for refused in ({"sub": "00u1stranger", "preferred_username": "alice", "groups": ["ml-researchers"]},
                    {"sub": "00u1alice0example0001", "groups": ["contractors"]},  # not in the allowed groups
                    {"preferred_username": "alice", "groups": ["ml-researchers"]}):
        with pytest.raises(ValueError):
            hub.user_info_to_username(refused)


def test_a_notebook_of_someone_with_no_uid_is_never_started(prod: ClusterConfig, tmp_path: Path) -> None:
    """Before: an unknown name ran as UID 1000, someone else's on /shared. Now the spawn fails."""
    with pytest.raises(ValueError, match="mallory has no UID of their own"):
        spawn(load(prod, tmp_path), "gpu-1", User("mallory"))


def directory_config(**ldap: Any) -> ClusterConfig:
    raw = raw_config("prod")
    raw["slurm"].pop("accounts", None)
    for partition in raw["partitions"].values():
        partition.pop("accounts", None)
    raw["addons"]["jupyterhub"].pop("oidc")
    raw["slurm"]["identity"] = {"ldap": {"uri": "ldap://ldap.example.org:389", "baseDN": "dc=example,dc=org",
                                         **ldap}}
    config, problems = parse_cluster_config(raw, "prod")
    assert [p for p in problems if p.severity == "error"] == []
    return config


def test_in_ldap_mode_the_server_is_verified_and_only_the_groups_sign_in(tmp_path: Path) -> None:
    config = directory_config(allowGroups=["ml-researchers"], groupSearchBase="ou=groups,dc=example,dc=org",
                              caCertificate="k8s:ldap-ca/ca.crt")
    values = chart_values(config, config.addons.jupyterhub)
    hub = authenticator(load(config, tmp_path))
    assert type(hub).__name__ == "LDAPAuthenticator"
    # ldap3's Tls validates nothing unless told (validate defaults to ssl.CERT_NONE): told here, with the CA.
    assert hub.tls_kwargs == {"validate": ssl.CERT_REQUIRED, "ca_certs_file": "/etc/jupyterhub/ldap-ca/ca.crt"}
    assert ldap3.Tls().validate == ssl.CERT_NONE  # what the hub verified before: nothing
    assert ldap3.Tls(validate=hub.tls_kwargs["validate"]).validate == ssl.CERT_REQUIRED
    assert hub.allowed_groups == ["cn=ml-researchers,ou=groups,dc=example,dc=org"]
    assert hub.tls_strategy.name == "before_bind" and hub.auth_state_attributes == ["uidNumber", "gidNumber"]
    assert values["hub"]["extraVolumes"] == [{"name": "ldap-ca", "secret": {
        "secretName": "ldap-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]


def test_in_ldap_mode_a_notebook_runs_as_the_directorys_uid_for_that_person(tmp_path: Path) -> None:
    """Before: every directory person's notebook ran as the image's UID 1000 with /shared mounted read-write."""
    cfg = load(directory_config(), tmp_path)
    dave = User("dave", {"user_attributes": {"uidNumber": [41007], "gidNumber": [41000]}, "ldap_groups": []})
    assert (lambda s: (s.uid, s.gid))(spawn(cfg, "gpu-1", dave)) == (41007, 41000)
    for state in (None, {"user_attributes": {}}, {"user_attributes": {"uidNumber": [0], "gidNumber": [0]}}):
        with pytest.raises(ValueError, match="has no UID of their own"):
            spawn(cfg, "gpu-1", User("erin", state))


def test_the_hub_is_served_over_tls_only(prod: ClusterConfig) -> None:
    proxy = chart_values(prod, prod.addons.jupyterhub)["proxy"]
    annotations = proxy["service"]["annotations"]
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-cert"].startswith("arn:aws:acm:")
    assert annotations["service.beta.kubernetes.io/aws-load-balancer-ssl-ports"] == "https"
    assert proxy["https"] == {"enabled": True, "type": "offload"} and proxy["service"]["disableHttpPort"] is True


def test_a_broken_profile_is_seen(prod: ClusterConfig, tmp_path: Path) -> None:
    """The check fires: a profile whose override lost its node selector lands nowhere near its pool."""
    values = chart_values(prod, prod.addons.jupyterhub)
    broken = copy.deepcopy(values)
    del broken["singleuser"]["profileList"][2]["kubespawner_override"]["node_selector"]
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(hub_config_py(broken))
    cfg = traitlets_config.PyFileConfigLoader(path.name, str(tmp_path)).load_config()
    assert spawn(cfg, "trainium-16").node_selector != {POOL_LABEL: "ml-trn1"}, pprint.pformat(broken)
