"""A new config against the deployed one, by update policy: what is refused, with which problem and fix, and what
the running cluster is asked (a stand-in ClusterFacts here; the twin asks its real daemons in
tests/twin/test_journey_day_two.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from components.config.cluster import ClusterConfig
from components.config.update_policy import Kind
from components.config.validation import parse_cluster_config
from scripts.change.change_gate import ChangeGateError, change_set
from scripts.change.cluster_facts import FactsUnavailable, Job, count_sessions, parse_squeue
from scripts.change.compare import Change, compare
from scripts.change.deployed import Deployed
from scripts.change.render import changes_json, render_markdown, render_text
from tests.config.helpers import raw_config


def dumped(raw: dict[str, Any]) -> dict[str, Any]:
    config, _ = parse_cluster_config(raw, "test.yaml")
    return config.model_dump(by_alias=True, mode="json")


def changes(stack: str, mutate: Callable[[dict[str, Any]], None]) -> list[Change]:
    """The change `mutate` makes to the deployed config, compared as recorded (the new one is not validated: the
    rules that relate settings are tested in tests/config)."""
    before = dumped(raw_config(stack))
    after = copy.deepcopy(before)
    mutate(after)
    return compare(before, after)


def only(found: list[Change]) -> Change:
    assert len(found) == 1, [c.name for c in found]
    return found[0]


class Facts:
    def __init__(self, jobs: Sequence[Job] = (), sessions: int = 0, reachable: bool = True) -> None:
        self._jobs, self._sessions, self.reachable, self.drained = list(jobs), sessions, reachable, []

    def jobs(self, partitions: Sequence[str]) -> list[Job]:
        if not self.reachable:
            raise FactsUnavailable("kubectl is not on PATH")
        return [j for j in self._jobs if j.partition in partitions and j.partition not in self.drained]

    def sessions(self) -> int:
        if not self.reachable:
            raise FactsUnavailable("kubectl is not on PATH")
        return self._sessions

    def drain(self, partition: str) -> None:
        self.drained.append(partition)


def gate(stack: str, mutate: Callable[[dict[str, Any]], None], facts: Facts | None = None,
         force: Sequence[str] = (), drain: float | None = None) -> list[Change]:
    raw = raw_config(stack)
    record = Deployed(stack, dumped(raw), None, "test record")
    mutate(raw)
    config, _ = parse_cluster_config(raw, "test.yaml")
    return change_set(stack, config, record, facts, list(force), drain).changes


def test_no_change_is_no_change() -> None:
    assert changes("prod", lambda raw: None) == []


def scratch(raw: dict[str, Any]) -> None:
    raw["storage"]["fsx"] = {"deploymentType": "SCRATCH_2", "capacityGiB": raw["storage"]["fsx"]["capacityGiB"]}


@pytest.mark.parametrize(("key", "mutate", "fix"), [
    ("storage.fsx.deploymentType", scratch, "copy /shared"),
    ("clusterName", lambda raw: raw.__setitem__("clusterName", "slurm-eks-prod-2"), "a new name is a new stack"),
    ("network.efaAvailabilityZone", lambda raw: raw["network"].__setitem__("efaAvailabilityZone", "us-west-2b"),
     "a new zone is a new file system"),
])
def test_what_replaces_the_cluster_or_its_data_is_refused_with_the_fix(
        key: str, mutate: Callable[[dict[str, Any]], None], fix: str) -> None:
    change = next(c for c in gate("prod", mutate) if c.name == key)
    assert change.name == key and change.policy.kind is Kind.NEW_CLUSTER and change.refused
    assert fix in change.policy.fix
    assert "REFUSED" in render_text([change], "x") and fix in render_text([change], "x")


def test_a_forced_change_is_allowed_and_says_so() -> None:
    change = only(gate("prod", lambda raw: raw.__setitem__("clusterName", "other"), force=["clusterName"]))
    assert change.forced and not change.refused and "FORCED" in render_text([change], "x")


def test_a_force_that_names_no_change_is_an_error() -> None:
    with pytest.raises(ChangeGateError, match="--force clustername: names no change"):
        gate("prod", lambda raw: raw.__setitem__("clusterName", "other"), force=["clustername"])


def test_grow_only_sizes_grow_and_never_shrink() -> None:
    grow = only(changes("prod", lambda raw: raw["storage"]["fsx"].__setitem__("capacityGiB", 9600)))
    assert grow.policy.kind is Kind.GROW_ONLY and not grow.refused
    shrink = only(changes("prod", lambda raw: raw["storage"]["fsx"].__setitem__("capacityGiB", 2400)))
    assert shrink.refused and shrink.problem == "storage.fsx.capacityGiB shrinks from 4800 to 2400"


def test_kubernetes_moves_one_minor_version_at_a_time_and_never_down() -> None:
    step = only(changes("prod", lambda raw: raw.__setitem__("kubernetesVersion", "1.34")))
    assert step.policy.kind is Kind.ROLLS_NODES and not step.refused
    assert "skips a minor" in only(changes("prod", lambda raw: raw.__setitem__("kubernetesVersion", "1.35"))).problem
    assert "downgrade" in only(changes("prod", lambda raw: raw.__setitem__("kubernetesVersion", "1.32"))).problem


def test_a_database_class_change_waits_for_the_maintenance_window() -> None:
    change = only(changes("prod", lambda raw: raw["slurm"].setdefault("accounting", {}).__setitem__(
        "instanceClass", "db.r7g.large")))
    assert change.policy.kind is Kind.MAINTENANCE_WINDOW and not change.refused
    assert "--apply-immediately" in change.policy.kind.loses


def partition_of(raw: dict[str, Any]) -> str:
    """A partition that is not the default one (a stack needs one)."""
    return [name for name, p in raw["partitions"].items() if not p.get("default")][-1]


def drop_first_partition(raw: dict[str, Any]) -> None:
    del raw["partitions"][partition_of(raw)]


def test_a_partition_with_jobs_is_not_removed_and_the_jobs_are_named() -> None:
    name = partition_of(raw_config("prod"))
    job = Job(4242, "alice", "llama-70b", "RUNNING", name)
    change = only(gate("prod", drop_first_partition, Facts([job])))
    assert change.action == "remove" and change.policy.kind is Kind.PARTITION_IDLE and change.refused
    assert "job 4242 'llama-70b' of alice (RUNNING)" in change.problem
    assert f"scontrol update PartitionName={name} State=DRAIN" in change.problem


def test_an_idle_partition_goes_and_an_unknown_one_does_not() -> None:
    assert not only(gate("prod", drop_first_partition, Facts())).refused
    unknown = only(gate("prod", drop_first_partition, Facts(reachable=False)))
    assert unknown.refused and "cannot tell whether partition" in unknown.problem
    assert only(gate("prod", drop_first_partition, None)).refused  # offline: nobody looked


def test_drain_waits_for_the_partition_then_lets_it_go() -> None:
    name = partition_of(raw_config("prod"))
    facts = Facts([Job(7, "bob", "sweep", "RUNNING", name)])
    change = only(gate("prod", drop_first_partition, facts, drain=0))
    assert facts.drained == [name] and not change.refused


def test_a_rename_is_a_removal_and_an_addition() -> None:
    def rename(raw: dict[str, Any]) -> None:
        raw["partitions"]["renamed"] = raw["partitions"].pop(partition_of(raw))
    found = changes("prod", rename)
    assert sorted((c.action, c.key[-1]) for c in found) == [("add", "renamed"), ("remove", partition_of(
        raw_config("prod")))]


def test_adding_a_person_applies_live_and_a_uid_never_changes_or_returns() -> None:
    def add(raw: dict[str, Any]) -> None:
        raw["slurm"]["identity"]["users"]["zoe"] = {"uid": 29999, "groups": ["ml"], "sshKeys": []}
    raw = raw_config("prod")
    groups = raw["slurm"]["identity"]["groups"]
    group = next(iter(groups))

    def add_in_group(r: dict[str, Any]) -> None:
        add(r)
        r["slurm"]["identity"]["users"]["zoe"]["groups"] = [group]
    person = only(changes("prod", add_in_group))
    assert person.action == "add" and person.policy.kind is Kind.LIVE and not person.refused
    first = next(iter(raw["slurm"]["identity"]["users"]))
    moved = only(changes("prod", lambda r: r["slurm"]["identity"]["users"][first].__setitem__("uid", 29998)))
    assert moved.refused and moved.policy.kind is Kind.IDENTITY
    uid = raw["slurm"]["identity"]["users"][first]["uid"]

    def reuse(r: dict[str, Any]) -> None:
        entry = r["slurm"]["identity"]["users"].pop(first)
        r["slurm"]["identity"]["users"]["newcomer"] = {**entry, "uid": uid}
    found = changes("prod", reuse)
    newcomer = next(c for c in found if c.key[-1] == "newcomer")
    assert newcomer.refused and f"UID {uid} of new person newcomer belonged to {first}" in newcomer.problem


def test_a_group_keeps_its_gid_and_new_groups_are_added_live() -> None:
    raw = raw_config("prod")
    group, gid = next(iter(raw["slurm"]["identity"]["groups"].items()))
    added = only(changes("prod", lambda r: r["slurm"]["identity"]["groups"].__setitem__("newteam", 39999)))
    assert not added.refused
    moved = only(changes("prod", lambda r: r["slurm"]["identity"]["groups"].__setitem__(group, 39998)))
    assert moved.refused and f"group GID changed: {group} {gid} -> 39998" in moved.problem


def test_a_login_roll_counts_the_sessions_it_would_drop() -> None:
    def image(raw: dict[str, Any]) -> None:
        raw["slurm"].setdefault("images", {})["login"] = "ghcr.io/slinkyproject/login-pyxis:25.11.8-ubuntu24.04"
    busy = only(gate("prod", image, Facts(sessions=3)))
    assert busy.policy.kind is Kind.ROLLS_LOGIN and busy.refused
    assert busy.problem == "3 ssh session(s) on the login pods would drop"
    assert not only(gate("prod", image, Facts(sessions=0))).refused


def test_the_reports_carry_policy_problem_and_fix() -> None:
    found = gate("prod", lambda raw: raw.__setitem__("clusterName", "x"))
    document = changes_json(found, "record")
    assert document["refused"] == 1 and document["changes"][0]["policy"] == "new_cluster"
    assert "| `clusterName` |" in render_markdown(found, "record")


def test_squeue_json_and_ps_are_read() -> None:
    document = '{"jobs": [{"job_id": 5, "user_name": "amy", "name": "a", "job_state": ["RUNNING"], "partition": "p"}]}'
    assert parse_squeue(document) == [Job(5, "amy", "a", "RUNNING", "p")]
    assert count_sessions("sshd: /usr/sbin/sshd -D\nsshd: amy [priv]\nsshd: amy@pts/0\nsshd-session: bo [priv]\n") == 2


def test_no_record_compares_nothing_and_a_record_of_another_stack_is_refused() -> None:
    config, _ = parse_cluster_config(raw_config("prod"), "test.yaml")
    assert "no deployed record" in change_set("prod", config, None, None, []).notes[0]
    with pytest.raises(ChangeGateError, match="the record of stack dev, not prod"):
        change_set("prod", config, Deployed("dev", {}, None, "dev.json"), None, [])


def test_dumped_configs_round_trip() -> None:
    raw = raw_config("prod")
    assert ClusterConfig.model_validate(copy.deepcopy(dumped(raw))).model_dump(by_alias=True, mode="json") == dumped(
        raw)
