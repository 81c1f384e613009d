"""Rules on the login pods: who may reach SSH, and that every listed key is one OpenSSH public key."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.rules.registry import Found, rule

SSH_KEY = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
                     r" [A-Za-z0-9+/=]+( .*)?$")




def key_findings(path: str, keys: list[str]) -> Iterator[Found]:
    """Each entry must be one OpenSSH public key line, and never a private key."""
    for i, key in enumerate(keys):
        if "PRIVATE KEY" in key:
            yield Found(f"{path}[{i}]", "[a private key]", "this is a PRIVATE key: never put it in a stack file",
                        "remove it now, rotate it, and list the matching public key (~/.ssh/id_*.pub)")
        elif not SSH_KEY.match(key.strip()):
            yield Found(f"{path}[{i}]", key[:40], "not an OpenSSH public key",
                        "paste one line of ~/.ssh/id_ed25519.pub")


@rule("login-ssh-keys")
def login_ssh_keys(c: ClusterConfig) -> Iterator[Found]:
    yield from key_findings("slurm.login.rootSshKeys", c.slurm.login.root_ssh_keys)


@rule("login-no-keys", "warning")
def login_no_keys(c: ClusterConfig) -> Iterator[Found]:
    if c.slurm.login.replicas and not c.slurm.login.root_ssh_keys and c.slurm.identity.mode == "none":
        yield Found("slurm.identity", {}, "no users and no directory: nobody can log in to the login pods",
                    "declare people under slurm.identity.users (or slurm.identity.ldap)")
