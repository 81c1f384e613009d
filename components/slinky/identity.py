"""What each Slurm pod needs to resolve and admit people (`slurm.identity`): SSSD's configuration, the account
lines and SSH keys of the people the stack declares, and the login pod's sshd settings.

Where each pod gets users from (SlinkyProject/containers 05efda08 schedmd/slurm/25.11/ubuntu24.04/Dockerfile):
- login and slurmd images install sssd, libnss-sss and libpam-sss, select authselect's `sssd with-mkhomedir`
  profile and run `sssd -i` under supervisord (files/etc/supervisor/conf.d/sssd.conf), so both get an sssd.conf:
  the LoginSet through its required `sssdConfRef` (slurm-operator v1.2.1 internal/builder/loginbuilder/
  login_app.go mounts it at /etc/sssd/sssd.conf, 0600), NodeSets through a volume of ours (`pod_identity`).
- slurmctld and slurmrestd images have no sssd: they resolve names from /etc/passwd and /etc/group only.

Job steps need no lookup on slurmd pods: Slinky's slurm.conf sets `AuthInfo=use_client_ids` (slurm-operator
v1.2.1 internal/builder/common/const.go), so the login pod's sackd packs the submitter's passwd and groups into
the credential (SchedMD/slurm slurm-25-11-6-1 src/plugins/auth/slurm/sack.c), and with
`LaunchParameters=enable_nss_slurm` (components/slinky/slurm_conf.py) slurmstepd serves them to the step
(doc/html/nss_slurm.shtml; the slurmd image puts `slurm` first in nsswitch). REST submissions carry a JWT with
only a user name: slurmctld maps it with getpwnam/getpwuid (src/plugins/auth/jwt/auth_jwt.c auth_p_get_ids)
and, lacking a client identity, looks the user up itself for the job credential (src/interfaces/cred.c
fetch_identity). So declared people are added to slurmctld's and slurmrestd's files too; a directory's people
are not (those images cannot read it).

Declared people ("users" mode) are written by an init container in the pod's own image, running
files/identity-setup.sh, into an emptyDir that the daemon container mounts over /etc/passwd, /etc/group and
/etc/shadow: it runs before any daemon starts, and works in the non-root slurmctld and slurmrestd pods, where a
postStart hook could not write /etc.

People change without restarts: on the login, slurmctld and slurmrestd pods a native sidecar (`identity-sync`,
an init container with restartPolicy Always: kubernetes.io/docs/concepts/workloads/pods/sidecar-containers, on by
default since Kubernetes 1.29) runs files/identity-sync.sh, which re-runs the setup when the identity ConfigMap's
volume changes. The kubelet rewrites a ConfigMap volume in place when the object changes (not a subPath mount:
kubernetes.io/docs/concepts/configuration/configmap "Mounted ConfigMaps are updated automatically"); the setup
appends to the same files the daemon container has bound (the same inodes) and rewrites the key files in the
bound directory, which sshd reads at each login (AuthorizedKeysFile). slurmctld and slurmrestd look people up in
/etc/passwd per request (getpwnam), so nothing restarts: open ssh sessions and interactive jobs stay. NodeSet pods
need no one (AuthInfo=use_client_ids) and take the annotation's digest as they are replaced (OnDelete).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from components.config.teams import Identity
from components.names import SHARED_MOUNT, SHARED_VOLUME_NAME

SSSD_DIR = "/etc/sssd"
SSSD_CONF_KEY = "sssd.conf"
LDAP_CA_KEY = "ldap-ca.pem"
LDAP_CA_FILE = f"{SSSD_DIR}/{LDAP_CA_KEY}"
# Each declared person's keys, installed by the setup script; sshd reads them through AuthorizedKeysFile.
KEYS_DIR = "/etc/ssh/authorized_keys"
# sssd-common's helper, which asks sssd's ssh responder for a directory user's keys (sss_ssh_authorizedkeys(1)).
SSS_AUTHORIZED_KEYS = "/usr/bin/sss_ssh_authorizedkeys"
SETUP_SCRIPT = Path(__file__).resolve().parent / "files" / "identity-setup.sh"
SYNC_SCRIPT = Path(__file__).resolve().parent / "files" / "identity-sync.sh"
SYNC_CONTAINER = "identity-sync"
SYNC_SECONDS = 10  # how often the sidecar compares the ConfigMap's files; the kubelet's own sync is about a minute
SOURCE_DIR = "/etc/slurm-eks/identity"  # the identity ConfigMap, in the init container
ROOT_DIR = "/identity"  # the emptyDir, in the init container
# The ConfigMap's digest on the NodeSets' pod template: their pods take it as they are replaced (OnDelete). The
# login, slurmctld and slurmrestd pods carry none: their sidecar applies a change without a restart.
ANNOTATION = "slurm-eks.io/identity"

# Users and groups SSSD never answers for (Slinky's chart default): root and Slurm's own user stay local.
_NSS = "[nss]\nfilter_groups = root,slurm\nfilter_users = root,slurm\n\n[pam]\n"
# Without a directory: the proxy provider over /etc/passwd, as Slinky's chart configures SSSD since newer
# releases dropped `id_provider = files` (slurm-operator v1.2.1 helm/slurm/values.yaml `sssd.conf`).
_PROXY_DOMAIN = """[domain/DEFAULT]
id_provider = proxy
proxy_lib_name = files
auth_provider = proxy
proxy_pam_target = sssd-shadowutils
"""

# login: the LoginSet (sssd.conf from the operator); compute: a NodeSet; daemon: the Controller and RestApi, whose
# images have no sssd and whose pods run as non-root users (slurm-operator v1.2.1 internal/builder/
# controllerbuilder/controller_app.go, restapibuilder/restapi_app.go: runAsNonRoot, the slurm and nobody users),
# who cannot read the image's shadow.
PodKind = Literal["login", "compute", "daemon"]


def sssd_conf(identity: Identity, bind_password: str | None = None) -> str:
    """sssd.conf for `identity`; in "ldap" mode with a bind DN, `bind_password` is the bind DN's password
    (read when `pulumi up` runs). Option names: sssd.conf(5), sssd-ldap(5), sssd-ldap-attributes(5) and
    sssd-simple(5) of SSSD 2.9 (SSSD/sssd 2.9.4 src/man), the release in the Ubuntu 24.04 images."""
    ldap = identity.ldap
    if ldap is None:
        return f"[sssd]\nservices = nss,pam\ndomains = DEFAULT\n\n{_NSS}\n{_PROXY_DOMAIN}"
    options = {
        "id_provider": "ldap",
        "auth_provider": "ldap",
        "ldap_uri": ldap.uri,
        "ldap_search_base": ldap.base_dn,
        "ldap_schema": ldap.schema_,
        # The server's certificate is always verified; ldap:// upgrades with StartTLS before anything is sent.
        "ldap_tls_reqcert": "demand",
        **({"ldap_id_use_start_tls": "true"} if ldap.uri.startswith("ldap://") else {}),
        **({"ldap_tls_cacert": LDAP_CA_FILE} if ldap.ca_certificate else {}),
    }
    if ldap.bind_dn:
        if bind_password is None or any(c in bind_password for c in "\r\n"):
            raise ValueError("the LDAP bind password must be one line: sssd.conf holds it as one value")
        options |= {"ldap_default_bind_dn": ldap.bind_dn, "ldap_default_authtok_type": "password",
                    "ldap_default_authtok": bind_password}
    options |= {
        # Per-user keys come from the directory: sshd asks sss_ssh_authorizedkeys (services = ssh).
        "ldap_user_ssh_public_key": "sshPublicKey",
        "override_homedir": f"{identity.home_base}/%u",
        # People log in by key only (sshd_config below), so no password hash is worth caching; identities
        # stay cached (entry_cache_timeout) so a short directory outage does not fail running jobs' lookups.
        "cache_credentials": "false",
        "access_provider": "simple" if ldap.allow_groups else "permit",
        **({"simple_allow_groups": ", ".join(ldap.allow_groups)} if ldap.allow_groups else {}),
    }
    domain = "".join(f"{key} = {value}\n" for key, value in options.items())
    return f"[sssd]\nservices = nss, pam, ssh\ndomains = LDAP\n\n{_NSS}\n[ssh]\n\n[domain/LDAP]\n{domain}"


def sshd_config(identity: Identity, root_keys: bool) -> str:
    """The LoginSet's `extraSshdConfig`. The operator writes it at the end of sshd_config, after only Include
    /etc/ssh/sshd_config.d/*.conf (the login image's Dockerfile puts nothing there), UsePAM, X11Forwarding and
    Subsystem (slurm-operator v1.2.1 internal/builder/loginbuilder/login_config.go buildSshdConfig); sshd keeps
    the first value of a keyword, so nothing before sets what we set. Keys only, never passwords; root only by
    key and only when the stack lists root's keys (mounted at /root/.ssh/authorized_keys by login_app.go)."""
    lines = [
        f"PermitRootLogin {'prohibit-password' if root_keys else 'no'}",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
    ]
    if identity.mode == "ldap":
        lines += ["AuthorizedKeysFile none", f"AuthorizedKeysCommand {SSS_AUTHORIZED_KEYS} %u",
                  "AuthorizedKeysCommandUser nobody"]
    else:  # the stack's keys only: a key a user drops into ~/.ssh is not honoured
        lines.append(f"AuthorizedKeysFile {KEYS_DIR}/%u")
    if root_keys:
        lines += ["Match User root", "    AuthorizedKeysFile .ssh/authorized_keys"]
    return "".join(f"{line}\n" for line in lines)


def account_files(identity: Identity) -> dict[str, str]:
    """The identity ConfigMap: passwd, group and shadow lines of the declared people (passwd(5), group(5),
    shadow(5)), each person's keys as `<user>.keys`, and the setup script. The shadow password `*` matches no
    password, without locking the account as `!` would."""
    users = sorted(identity.users.items())
    passwd = [f"{name}:x:{p.uid}:{identity.groups[p.groups[0]]}::{identity.home_base}/{name}:{p.shell}"
              for name, p in users]
    group = [f"{name}:x:{gid}:{','.join(u for u, p in users if name in p.groups)}"
             for name, gid in sorted(identity.groups.items())]
    shadow = [f"{name}:*:::::::" for name, _ in users]
    files = {"passwd": _lines(passwd), "group": _lines(group), "shadow": _lines(shadow),
             "setup.sh": SETUP_SCRIPT.read_text(), "sync.sh": SYNC_SCRIPT.read_text()}
    files |= {f"{name}.keys": _lines(key.strip() for key in p.ssh_keys) for name, p in users if p.ssh_keys}
    return files


def _lines(lines: Iterable[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


@dataclass(frozen=True)
class PodIdentity:
    """What one Slinky pod template gains: volumes, init containers, mounts of its daemon container, and
    annotations of its pod template."""

    volumes: list[dict[str, Any]] = field(default_factory=list)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


def pod_identity(identity: Identity, kind: PodKind, image: str, config_map: str, sssd_secret: str,
                 setup_resources: dict[str, Any]) -> PodIdentity:
    """`image` is the daemon's: the init container starts from that image's own passwd, group and shadow."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    sssd_items = [] if kind == "daemon" else [
        *([{"key": SSSD_CONF_KEY, "path": SSSD_CONF_KEY, "mode": 0o600}] if kind == "compute" else []),
        *([{"key": LDAP_CA_KEY, "path": LDAP_CA_KEY, "mode": 0o644}]
          if identity.ldap and identity.ldap.ca_certificate else [])]
    if sssd_items:
        # Not NodeSet `ssh.enabled` + `sssdConfRef`: that also starts sshd on port 22 of every slurmd pod
        # (slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go), and nobody logs in there.
        volumes.append({"name": "identity-sssd", "secret": {"secretName": sssd_secret, "items": sssd_items}})
        mounts += [{"name": "identity-sssd", "mountPath": f"{SSSD_DIR}/{item['path']}", "subPath": item["path"],
                    "readOnly": True} for item in sssd_items]
    if identity.mode != "users":
        return PodIdentity(volumes, [], mounts, {})
    files = ["passwd", "group"] if kind == "daemon" else ["passwd", "group", "shadow"]
    if kind == "login":
        files.append(KEYS_DIR.removeprefix("/etc/"))
    mounts += [{"name": "identity-files", "mountPath": f"/etc/{path}", "subPath": f"etc/{path}", "readOnly": True}
               for path in files]
    volumes += [{"name": "identity", "configMap": {"name": config_map}},
                {"name": "identity-files", "emptyDir": {}}]
    env = {"IDENTITY_SOURCE": SOURCE_DIR, "IDENTITY_ROOT": ROOT_DIR, "IDENTITY_SEED": "/etc",
           **({"IDENTITY_LOGIN": "1"} if kind == "login" else {})}
    init = {
        "name": "identity", "image": image, "command": ["/bin/sh", f"{SOURCE_DIR}/setup.sh"],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "volumeMounts": [
            {"name": "identity", "mountPath": SOURCE_DIR, "readOnly": True},
            {"name": "identity-files", "mountPath": ROOT_DIR},
            # Homes are made on the shared file system, seen under the script's root.
            *([{"name": SHARED_VOLUME_NAME, "mountPath": f"{ROOT_DIR}{SHARED_MOUNT}"}] if kind == "login" else [])],
        "resources": setup_resources,
    }
    if kind == "compute":
        files_text = "".join(f"{name}\0{text}\0" for name, text in sorted(account_files(identity).items()))
        return PodIdentity(volumes, [init], mounts, {ANNOTATION: hashlib.sha256(files_text.encode()).hexdigest()[:16]})
    sync = {**init, "name": SYNC_CONTAINER, "restartPolicy": "Always",
            "command": ["/bin/sh", f"{SOURCE_DIR}/sync.sh"],
            "env": [*init["env"], {"name": "IDENTITY_SYNC_SECONDS", "value": str(SYNC_SECONDS)}]}
    return PodIdentity(volumes, [init, sync], mounts, {})
