"""Who the Slurm pods know: the declared people reach every pod's passwd, group and shadow through the identity
init container and its script (run here against a temp root, as root, as in the pod), the login pod gets their
keys and homes, and root logs in only when the stack lists root's keys."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from components.config.teams import Identity
from components.slinky import identity
from components.slinky.specs import IDENTITY_CONFIG_MAP, SSSD, loginset_spec
from tests.conftest import require_tool, unavailable
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, objects, plan_of, variant

# What Slinky's images start with (SlinkyProject/containers 05efda08 schedmd/slurm/25.11/ubuntu24.04/
# Dockerfile: the base image's system users, SlurmUser `slurm` as UID/GID 401, no /home users).
IMAGE_FILES = {
    "passwd": "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
              "slurm:x:401:401::/home/slurm:/usr/sbin/nologin\n",
    "group": "root:x:0:\nshadow:x:42:\nnogroup:x:65534:\nslurm:x:401:\n",
    "shadow": "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\nslurm:!:19000::::::\n",
}


def _prod_identity() -> Identity:
    return config_of(variant("prod", lambda _: None)).slurm.identity


@pytest.fixture(scope="module")
def people() -> Identity:
    return _prod_identity()


@pytest.fixture
def pod(tmp_path: Path, people: Identity) -> dict[str, Path]:
    """A login pod's view: the ConfigMap's files, and a root holding the image's etc and the shared file system."""
    if os.geteuid() != 0:
        unavailable("the identity setup script runs as root in the pod (it chowns keys and homes): run as root")
    source, root = tmp_path / "source", tmp_path / "root"
    source.mkdir()
    for name, text in identity.account_files(people).items():
        (source / name).write_text(text)
    (root / "etc").mkdir(parents=True)
    for name, text in IMAGE_FILES.items():
        (root / "etc" / name).write_text(text)
    (root / "shared").mkdir()
    return {"source": source, "root": root}


def setup(pod: dict[str, Path], login: bool = True) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "IDENTITY_SOURCE": str(pod["source"]), "IDENTITY_ROOT": str(pod["root"]),
           **({"IDENTITY_LOGIN": "1"} if login else {})}
    return subprocess.run(["sh", str(pod["source"] / "setup.sh")], env=env, capture_output=True, text=True,
                          timeout=60)


def snapshot(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Every path under `root` with its mode, owner, group and content."""
    out = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        out[str(path.relative_to(root))] = (info.st_mode, info.st_uid, info.st_gid,
                                            path.read_bytes() if path.is_file() else b"")
    return out


def entries(path: Path) -> dict[str, list[str]]:
    return {line.split(":")[0]: line.split(":") for line in path.read_text().splitlines()}


def test_the_configmap_holds_each_person_as_passwd_group_and_shadow_lines(people: Identity) -> None:
    files = identity.account_files(people)
    assert files["passwd"].splitlines() == [
        "alice:x:20001:30001::/shared/home/alice:/bin/bash", "bob:x:20002:30001::/shared/home/bob:/bin/bash",
        "carol:x:20003:30002::/shared/home/carol:/bin/bash"]
    assert files["group"].splitlines() == ["llm:x:30001:alice,bob", "vision:x:30002:carol"]
    assert files["shadow"].splitlines() == ["alice:*:::::::", "bob:*:::::::", "carol:*:::::::"]
    assert files["alice.keys"] == f"{people.users['alice'].ssh_keys[0]}\n"
    assert files["setup.sh"] == identity.SETUP_SCRIPT.read_text()
    assert files["sync.sh"] == identity.SYNC_SCRIPT.read_text()


def test_the_script_is_posix_sh_that_shellcheck_accepts() -> None:
    result = subprocess.run([require_tool("shellcheck"), "--shell=sh", "--severity=style", str(identity.SETUP_SCRIPT),
                             str(identity.SYNC_SCRIPT)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_each_person_is_added_once_and_a_second_run_changes_nothing(pod: dict[str, Path]) -> None:
    assert setup(pod).returncode == 0
    first = snapshot(pod["root"])
    etc = pod["root"] / "etc"
    for name in ("passwd", "group", "shadow"):
        text = (etc / name).read_text()
        assert text.startswith(IMAGE_FILES[name]), f"the image's {name} entries changed"
        assert text.removeprefix(IMAGE_FILES[name]) == (pod["source"] / name).read_text()
    assert setup(pod).returncode == 0
    assert snapshot(pod["root"]) == first


def test_keys_are_root_owned_files_sshd_strict_modes_accepts(pod: dict[str, Path], people: Identity) -> None:
    assert setup(pod).returncode == 0
    keys = pod["root"] / "etc" / "ssh" / "authorized_keys"
    assert sorted(p.name for p in keys.iterdir()) == sorted(n for n, p in people.users.items() if p.ssh_keys)
    for path in [keys, *keys.iterdir()]:
        info = path.stat()
        assert (info.st_uid, info.st_gid) == (0, 0)
        assert stat.S_IMODE(info.st_mode) == (0o755 if path == keys else 0o644)
    assert (keys / "alice").read_text().splitlines() == people.users["alice"].ssh_keys


def test_homes_are_made_private_and_owned_by_their_person(pod: dict[str, Path], people: Identity) -> None:
    kept = pod["root"] / "shared" / "home" / "bob"
    kept.mkdir(parents=True, mode=0o750)
    (kept / "notes").write_text("bob's\n")
    assert setup(pod).returncode == 0
    for name, person in people.users.items():
        info = (pod["root"] / "shared" / "home" / name).stat()
        if name == "bob":  # an existing home is left as it is
            assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o750, 0)
            assert (kept / "notes").read_text() == "bob's\n"
        else:
            assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (
                0o700, person.uid, people.groups[person.groups[0]])


def test_compute_and_daemon_pods_get_no_keys_or_homes(pod: dict[str, Path]) -> None:
    assert setup(pod, login=False).returncode == 0
    assert not (pod["root"] / "etc" / "ssh").exists() and list((pod["root"] / "shared").iterdir()) == []
    assert "alice" in entries(pod["root"] / "etc" / "passwd")


def test_existing_entries_are_never_changed(pod: dict[str, Path]) -> None:
    passwd = pod["root"] / "etc" / "passwd"
    passwd.write_text(IMAGE_FILES["passwd"] + "carol:x:20003:30002:Carol:/home/carol:/bin/zsh")  # no final newline
    assert setup(pod).returncode == 0
    found = entries(passwd)
    assert found["carol"] == ["carol", "x", "20003", "30002", "Carol", "/home/carol", "/bin/zsh"]
    names = [line.split(":")[0] for line in passwd.read_text().splitlines()]
    assert found["alice"][2] == "20001" and names.count("carol") == 1


@pytest.mark.parametrize(("file", "line", "error"), [
    ("passwd", "mallory:x:20001:30001::/home/mallory:/bin/sh", "ID 20001 of alice already belongs to mallory"),
    ("passwd", "alice:x:20099:30001::/home/alice:/bin/sh", "alice has ID 20099"),
    ("group", "gpu-admins:x:30001:", "ID 30001 of llm already belongs to gpu-admins"),
])
def test_a_clash_stops_the_pod_with_its_reason(pod: dict[str, Path], file: str, line: str, error: str) -> None:
    path = pod["root"] / "etc" / file
    path.write_text(path.read_text() + line + "\n")
    result = setup(pod)
    assert result.returncode != 0 and error in result.stderr, result.stderr


def test_a_pod_root_starts_from_the_image_files_it_can_read(pod: dict[str, Path], tmp_path: Path) -> None:
    """As in the slurmctld pod: an empty emptyDir, seeded from the image's /etc, whose shadow it cannot read."""
    seed = tmp_path / "image-etc"
    seed.mkdir()
    for name in ("passwd", "group"):
        (seed / name).write_text(IMAGE_FILES[name])
    root = tmp_path / "empty"
    env = {"PATH": os.environ["PATH"], "IDENTITY_SOURCE": str(pod["source"]), "IDENTITY_ROOT": str(root),
           "IDENTITY_SEED": str(seed)}
    assert subprocess.run(["sh", str(identity.SETUP_SCRIPT)], env=env, timeout=60).returncode == 0
    assert sorted(p.name for p in (root / "etc").iterdir()) == ["group", "passwd"]
    assert (root / "etc" / "passwd").read_text() == IMAGE_FILES["passwd"] + (pod["source"] / "passwd").read_text()


def test_every_slurm_pod_of_a_stack_with_people_runs_the_setup_first() -> None:
    plan = shipped_plan("prod")
    (config_map,) = [d for d in objects(plan, "ConfigMap").values() if d["metadata"]["name"] == IDENTITY_CONFIG_MAP]
    assert config_map["data"] == identity.account_files(_prod_identity())
    expected = {"LoginSet": ("login", ["passwd", "group", "shadow", "ssh/authorized_keys"]),
                "NodeSet": ("slurmd", ["passwd", "group", "shadow"]),
                "Controller": ("slurmctld", ["passwd", "group"]), "RestApi": ("slurmrestd", ["passwd", "group"])}
    for kind, (container, files) in expected.items():
        for doc in objects(plan, kind).values():
            spec = doc["spec"]
            init, *sidecar = spec["template"]["spec"]["initContainers"]
            assert init["command"] == ["/bin/sh", f"{identity.SOURCE_DIR}/setup.sh"]
            assert init["image"] == spec[container]["image"], "the init container must copy its daemon image's files"
            env = {e["name"]: e["value"] for e in init["env"]}
            assert (env.get("IDENTITY_LOGIN") == "1") == (kind == "LoginSet")
            mounted = {m["mountPath"]: m for m in spec[container]["volumeMounts"] if m["name"] == "identity-files"}
            assert sorted(mounted) == sorted(f"/etc/{f}" for f in files)
            assert all(m["readOnly"] and m["subPath"] == f"etc/{p.removeprefix('/etc/')}" for p, m in mounted.items())
            if kind == "NodeSet":  # its pods take people as they are replaced (OnDelete)
                assert sidecar == [] and identity.ANNOTATION in spec["template"]["metadata"]["annotations"]
                continue
            # The others take them running: the sidecar re-runs the setup, and no digest rolls them.
            assert identity.ANNOTATION not in spec["template"].get("metadata", {}).get("annotations", {})
            (sync,) = sidecar
            assert sync["name"] == identity.SYNC_CONTAINER and sync["restartPolicy"] == "Always"
            assert sync["command"] == ["/bin/sh", f"{identity.SOURCE_DIR}/sync.sh"]
            assert sync["volumeMounts"] == init["volumeMounts"] and sync["image"] == init["image"]


def test_a_stack_without_people_adds_no_setup() -> None:
    def no_people(raw: dict[str, Any]) -> None:
        raw["slurm"].pop("identity")
        raw["slurm"].pop("accounts", None)
        raw["slurm"].pop("qos", None)
        raw["addons"].pop("jupyterhub", None)  # its subjects map to declared people (rule jupyterhub-identity)
        for partition in raw["partitions"].values():
            partition.pop("accounts", None)

    config = config_of(variant("prod", no_people))
    spec = loginset_spec(config, "10.0.0.0/16", "partitions")
    assert "initContainers" not in spec["template"]["spec"] and "metadata" not in spec["template"]


def test_compute_pods_read_sssd_conf_without_running_sshd() -> None:
    for doc in objects(shipped_plan("prod"), "NodeSet").values():
        spec = doc["spec"]
        assert "ssh" not in spec  # ssh.enabled would start sshd on port 22 of every slurmd pod
        (volume,) = [v for v in spec["template"]["spec"]["volumes"] if v["name"] == "identity-sssd"]
        assert volume["secret"] == {"secretName": SSSD.name, "items": [
            {"key": "sssd.conf", "path": "sssd.conf", "mode": 0o600}]}
        assert {"name": "identity-sssd", "mountPath": "/etc/sssd/sssd.conf", "subPath": "sssd.conf",
                "readOnly": True} in spec["slurmd"]["volumeMounts"]


ROOT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBreakGlassRootKeyForOnCallOnlyReplaceMe000000 oncall@example.com"


def test_root_logs_in_only_when_the_stack_lists_root_keys() -> None:
    for stack in ("dev", "prod"):
        (login,) = objects(shipped_plan(stack), "LoginSet").values()
        assert login["spec"]["sssdConfRef"] == SSSD.ref
        assert "rootSshAuthorizedKeys" not in login["spec"]
        assert login["spec"]["extraSshdConfig"].startswith("PermitRootLogin no\n")
    config = config_of(variant("prod", lambda raw: raw["slurm"]["login"].update(rootSshKeys=[ROOT_KEY])))
    spec = loginset_spec(config, "10.0.0.0/16", "partitions")
    assert spec["rootSshAuthorizedKeys"] == f"{ROOT_KEY}\n"
    assert spec["extraSshdConfig"].startswith("PermitRootLogin prohibit-password\n")


def test_each_person_gets_private_log_and_checkpoint_directories(pod: dict[str, Path], people: Identity) -> None:
    """The job scripts write output to /shared/logs/<user> and checkpoints under /shared/checkpoints/<user>:
    made here for each declared person, 0700 and theirs; the parents sticky and open, root's."""
    squatted = pod["root"] / "shared" / "logs" / "alice"
    squatted.parent.mkdir(parents=True)
    squatted.symlink_to("/tmp")  # someone's link where alice's directory goes
    result = setup(pod)
    assert result.returncode != 0 and "logs/alice is not a directory" in result.stderr
    squatted.unlink()
    assert setup(pod).returncode == 0
    for parent in ("logs", "checkpoints"):
        info = (pod["root"] / "shared" / parent).stat()
        assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o1777, 0)
        for name, person in people.users.items():
            own = (pod["root"] / "shared" / parent / name).stat()
            assert (stat.S_IMODE(own.st_mode), own.st_uid) == (0o700, person.uid), (parent, name)


def test_a_new_person_changes_the_identity_configmap_and_no_pod_that_would_roll(tmp_path: Path) -> None:
    """`pulumi up` of a new person patches the ConfigMap; the LoginSet, Controller and RestApi stay as they are, so
    neither the operator nor the kubelet replaces their pods (the twin shows the session surviving:
    tests/twin/test_journey_day_two.py)."""
    def add(raw: dict[str, Any]) -> None:
        users = raw["slurm"]["identity"]["users"]
        first = next(iter(users))
        users["newcomer"] = {"uid": 29777, "groups": users[first]["groups"], "sshKeys": []}
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    before = plan_of(variant("dev", lambda _: None), tmp_path / "before", "dev")
    after = plan_of(variant("dev", add), tmp_path / "after", "dev")
    for kind in ("LoginSet", "Controller", "RestApi"):
        assert objects(before, kind) == objects(after, kind), kind
    assert objects(before, "ConfigMap")[IDENTITY_CONFIG_MAP] != objects(after, "ConfigMap")[IDENTITY_CONFIG_MAP]


def sync(pod: dict[str, Path]) -> subprocess.Popen[str]:
    env = {"PATH": os.environ["PATH"], "IDENTITY_SOURCE": str(pod["source"]), "IDENTITY_ROOT": str(pod["root"]),
           "IDENTITY_LOGIN": "1", "IDENTITY_SYNC_SECONDS": "0.2"}
    return subprocess.Popen(["sh", str(pod["source"] / "sync.sh")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def eventually(check: Any, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_the_sidecar_applies_a_changed_configmap_to_the_same_files(pod: dict[str, Path], people: Identity) -> None:
    """A person added and a person's keys removed reach the running pod: passwd grows in place (the inode the daemon
    container has bound stays), the new person's key file appears and the removed one's goes."""
    process = sync(pod)
    try:
        passwd = pod["root"] / "etc" / "passwd"
        keys = pod["root"] / "etc" / "ssh" / "authorized_keys"
        assert eventually(lambda: keys.is_dir() and any(not p.name.startswith(".") for p in keys.iterdir())), (
            "the sidecar's first run made no keys")
        inode = passwd.stat().st_ino
        gone = sorted(p.name for p in keys.iterdir() if not p.name.startswith("."))[0]  # not a copy in flight
        (pod["source"] / f"{gone}.keys").unlink()
        group = next(iter(people.groups.values()))
        with open(pod["source"] / "passwd", "a") as source:
            source.write(f"newcomer:x:29777:{group}::/shared/home/newcomer:/bin/bash\n")
        (pod["source"] / "newcomer.keys").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyOfTheNewcomer0 n\n")
        assert eventually(lambda: (keys / "newcomer").exists() and not (keys / gone).exists()), process.stdout
        assert "newcomer:x:29777:" in passwd.read_text() and passwd.stat().st_ino == inode
        assert eventually((pod["root"] / "shared" / "home" / "newcomer").is_dir)  # made after the keys
    finally:
        process.kill()
        process.wait()
