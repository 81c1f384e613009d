"""Configs that break each rule of components/config/rules/teams.py (people, accounts, QoS), in the shape of
test_validators.CASES: (stack, mutation, config path, words of the message)."""

from __future__ import annotations

from tests.config.helpers import Mutation, both, set_at

ALICE_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIProdExampleKeyAliceReplaceMeWithHerOwnKey000 alice@example.com"

TEAM_CASES: dict[str, list[tuple[str, Mutation, str, str]]] = {
    "identity-source": [
        ("prod", set_at("slurm.identity.ldap", {"uri": "ldaps://ldap.example.com", "baseDN": "dc=example,dc=com"}),
         "slurm.identity", "also read from LDAP"),
    ],
    "identity-groups": [
        ("prod", set_at("slurm.identity.users.carol.groups", ["visoin"]), "slurm.identity.users.carol.groups[0]",
         "not a group"),
    ],
    "identity-ids": [
        ("prod", set_at("slurm.identity.users.bob.uid", 20001), "slurm.identity.users.bob", "the same ID as 'alice'"),
        ("prod", set_at("slurm.identity.groups.vision", 30001), "slurm.identity.groups.vision", "the same ID as 'llm'"),
    ],
    "identity-ssh-keys": [
        ("prod", set_at("slurm.identity.users.bob.sshKeys", ["-----BEGIN OPENSSH PRIVATE KEY----- abc"]),
         "slurm.identity.users.bob.sshKeys[0]", "PRIVATE key"),
        ("prod", set_at("slurm.identity.users.bob.sshKeys", [ALICE_KEY, "hello"]),
         "slurm.identity.users.bob.sshKeys[1]", "not an OpenSSH public key"),
    ],
    "root-login": [("prod", set_at("slurm.login.rootSshKeys", [ALICE_KEY]), "slurm.login.rootSshKeys",
                    "root may log in")],
    "account-parent": [
        ("prod", set_at("slurm.accounts.vision.parent", "lmm"), "slurm.accounts.vision.parent", "not an account"),
        ("prod", both(set_at("slurm.accounts.vision.parent", "llm"), set_at("slurm.accounts.llm.parent", "vision")),
         "slurm.accounts.llm.parent", "each other's parents"),
        ("prod", set_at("slurm.accounts.llm.parent", "llm"), "slurm.accounts.llm.parent", "each other's parents"),
    ],
    "account-users": [
        ("prod", set_at("slurm.accounts.vision.users", ["carol", "dave"]), "slurm.accounts.vision.users[1]",
         "not a user"),
    ],
    "user-without-account": [
        ("prod", set_at("slurm.accounts.vision.users", []), "slurm.identity.users.carol", "in no Slurm account"),
    ],
    "account-qos": [
        ("prod", set_at("slurm.accounts.vision.qos", ["visoin"]), "slurm.accounts.vision.qos[0]", "not a QoS"),
        ("prod", set_at("slurm.accounts.vision.defaultQOS", "llm"), "slurm.accounts.vision.defaultQOS",
         "not one the account may use"),
    ],
    "partition-accounts": [
        ("prod", set_at("partitions.trainium.accounts", ["lm"]), "partitions.trainium.accounts[0]",
         "not an account"),
    ],
    "gpu-limit-capacity": [
        # llm reaches gpu-h100 (8 x 8) and gpu-a100 (16 x 8): 192 GPUs; one job at most 128.
        ("prod", set_at("slurm.qos.llm.grpTRES", {"gres/gpu": 193}), "slurm.qos.llm.grpTRES", "192 in partitions"),
        ("prod", set_at("slurm.qos.llm.maxTRESPerJob", {"gres/gpu": 129}), "slurm.qos.llm.maxTRESPerJob",
         "one job can get: 128"),
        # closed to vision, gpu-a100 leaves it the 64 H100s
        ("prod", both(set_at("partitions.gpu-a100.accounts", ["llm"]), set_at("slurm.qos.vision.grpTRES",
                                                                                {"gres/gpu": 65})),
         "slurm.qos.vision.grpTRES", "64 in partitions gpu-h100"),
        ("prod", set_at("slurm.accounts.vision.grpTRES", {"gres/gpu": 193}), "slurm.accounts.vision.grpTRES",
         "(192)"),
    ],
}
