"""The stack the accounts tests use on the local Slurm (tests/slurm/test_accounts_slurm.py), and whose applied
state the sacctmgr fixtures in data/sacctmgr/ hold (tests/slurm/test_accounts_current.py)."""

from __future__ import annotations

from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from tests.config.helpers import raw_config

# Names and IDs unlikely to exist on a machine running the tests.
USERS = {"sek-alice": 42001, "sek-bob": 42002, "sek-carol": 42003}
GROUP = ("sek-ml", 42000)
LIMITED = "sek-b-only"  # a partition only team b's account may use


def stack() -> ClusterConfig:
    """Two teams below a common parent, three users (bob in both), each team's QoS capping its GPUs (the local
    node has two fake ones), validated as a stack is."""
    raw = raw_config("dev")
    raw["slurm"]["identity"] = {"groups": {GROUP[0]: GROUP[1]},
                                "users": {name: {"uid": uid, "groups": [GROUP[0]]} for name, uid in USERS.items()}}
    raw["slurm"]["qos"] = {
        "sek-a": {"priority": 10, "grpTRES": {"gres/gpu": 2}, "maxTRESPerUser": {"gres/gpu": 1}, "maxWall": "1:00:00"},
        "sek-b": {"priority": 10, "grpTRES": {"gres/gpu": 1}}}
    raw["slurm"]["accounts"] = {
        "sek-research": {"description": "Research", "grpTRES": {"cpu": 64, "mem": 65536}},  # sacctmgr: mem=64G
        "sek-a": {"parent": "sek-research", "users": ["sek-alice", "sek-bob"], "qos": ["sek-a"], "defaultQOS": "sek-a"},
        "sek-b": {"parent": "sek-research", "users": ["sek-carol", "sek-bob"], "qos": ["sek-b"], "defaultQOS": "sek-b",
                  "fairshare": 2}}
    raw["partitions"][LIMITED] = {**raw["partitions"]["gpu"], "default": False, "accounts": ["sek-b"]}
    config, _ = parse_cluster_config(raw, "accounts-test")
    return config
