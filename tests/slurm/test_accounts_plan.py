"""The accounts reconcile's plan without Slurm: order, clearing with -1, what it never touches, and the values
sacctmgr stores (slurm/agent/accounts/). The same plan against the real slurmdbd: tests/slurm/test_accounts_slurm.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm.agent.accounts import desired, values
from slurm.agent.accounts.model import Account, Qos, State, User
from slurm.agent.accounts.plan import Change, PlanError, plan, render

CLUSTER = "c1"
MARK = f" {values.MARKER}"
# What every cluster has before the stack declares anything: Slurm's root account and normal QoS, root's user.
SLURM_OWN = State(CLUSTER, qos={"normal": Qos("normal", "normal qos default")},
                  accounts={"root": Account("root", "default root account", parent="", organization="root",
                                            qos=frozenset({"normal"}))},
                  users={"root": User("root", ("root",), "root")})


def document(**parts: object) -> State:
    return desired.parse({"format": 1, "cluster": CLUSTER, **parts})


def two_teams(gpus_b: int = 64) -> State:
    return document(
        qos={"team-a": {"GrpTRES": "gres/gpu=64", "MaxWall": "2-00:00:00", "Priority": 10},
             "team-b": {"GrpTRES": f"gres/gpu={gpus_b}", "MaxTRESPerUser": "gres/gpu=8", "Priority": 10}},
        accounts={"research": {"Description": "all research"},
                  "team-a": {"Parent": "research", "QOS": ["team-a"], "DefaultQOS": "team-a"},
                  "team-b": {"Parent": "research", "QOS": ["team-b"], "DefaultQOS": "team-b", "Fairshare": 2}},
        users={"alice": {"Accounts": ["team-a"], "DefaultAccount": "team-a"},
               "bob": {"Accounts": ["team-a", "team-b"], "DefaultAccount": "team-b"}})


def applied(state: State) -> State:
    """`state` as sacctmgr reads it back once applied: Slurm's own objects beside it."""
    return State(CLUSTER, {**SLURM_OWN.qos, **state.qos}, {**SLURM_OWN.accounts, **state.accounts},
                 {**SLURM_OWN.users, **state.users})


def texts(changes: list[Change]) -> list[str]:
    return [c.text for c in changes]


def test_from_nothing_qos_then_parents_then_children_then_users() -> None:
    changes = plan(two_teams(), SLURM_OWN)
    assert [(c.action, c.kind, c.name) for c in changes] == [
        ("add", "qos", "team-a"), ("add", "qos", "team-b"),
        ("add", "account", "research"), ("add", "account", "team-a"), ("add", "account", "team-b"),
        ("add", "user", "alice"), ("add", "user", "bob"), ("add", "user", "bob")]
    # A new user joins its default account first, and says so; its other accounts follow.
    assert changes[-2].args == ("add", "user", "bob", "account=team-b", f"cluster={CLUSTER}", "DefaultAccount=team-b")
    assert changes[-1].args == ("add", "user", "bob", "account=team-a", f"cluster={CLUSTER}")
    assert changes[0].args == ("add", "qos", "team-a", f"Description=team-a{MARK}", "Priority=10",
                               "GrpTRES=gres/gpu=64", "MaxWall=2-00:00:00")
    assert changes[3].args == ("add", "account", "team-a", f"cluster={CLUSTER}", f"Description=team-a{MARK}",
                               "Parent=research", "Fairshare=1", "QOS=team-a", "DefaultQOS=team-a")


def test_parents_come_first_whatever_the_names() -> None:
    wanted = document(accounts={"a": {"Parent": "b"}, "b": {"Parent": "c"}, "c": {}})
    assert [c.name for c in plan(wanted, SLURM_OWN)] == ["c", "b", "a"]


def test_applied_state_plans_nothing() -> None:
    assert plan(two_teams(), applied(two_teams())) == []
    assert render([]).startswith("No changes")


def test_a_lower_limit_is_one_modify_with_old_and_new() -> None:
    (change,) = plan(two_teams(gpus_b=32), applied(two_teams()))
    assert change.text == "~ qos team-b: GrpTRES gres/gpu=64 -> gres/gpu=32"
    assert change.args == ("modify", "qos", "where", "name=team-b", "set", "GrpTRES=gres/gpu=32")
    assert render([change]) == "0 to add, 1 to change, 0 to remove\n~ qos team-b: GrpTRES gres/gpu=64 -> gres/gpu=32\n"


def test_limits_dropped_from_the_stack_are_cleared_with_minus_one() -> None:
    before = applied(document(
        qos={"q": {"GrpTRES": "cpu=8,gres/gpu=64", "MaxWall": "1-00:00:00", "MaxJobsPerUser": 4}},
        accounts={"t": {"QOS": ["q"], "DefaultQOS": "q", "GrpTRES": "gres/gpu=16"}}))
    after = document(qos={"q": {"GrpTRES": "gres/gpu=32"}}, accounts={"t": {}})
    qos, account = plan(after, before)
    assert qos.args == ("modify", "qos", "where", "name=q", "set", "GrpTRES=cpu=-1,gres/gpu=32",
                        "MaxJobsPerUser=-1", "MaxWall=-1")
    assert account.args == ("modify", "account", "where", "name=t", f"cluster={CLUSTER}", "set",
                            "QOS=", "DefaultQOS=-1", "GrpTRES=gres/gpu=-1")
    assert account.text == "~ account t: QOS q -> inherited, DefaultQOS q -> none, GrpTRES gres/gpu=16 -> none"
    assert plan(after, applied(after)) == []


def test_removals_come_last_users_then_children_then_qos() -> None:
    changes = plan(document(), applied(two_teams()))
    assert [(c.action, c.kind, c.name) for c in changes] == [
        ("remove", "user", "alice"), ("remove", "user", "bob"), ("remove", "user", "bob"),
        ("remove", "account", "team-a"), ("remove", "account", "team-b"), ("remove", "account", "research"),
        ("remove", "qos", "team-a"), ("remove", "qos", "team-b")]
    assert changes[0].args == ("remove", "user", "where", "name=alice", "account=team-a", f"cluster={CLUSTER}")
    # bob's default account (team-b) goes last: see test_a_user_leaving_every_account_leaves_the_default_last.
    assert [c.args[4] for c in changes[1:3]] == ["account=team-a", "account=team-b"]
    assert changes[3].args == ("remove", "account", "where", "name=team-a", f"cluster={CLUSTER}")
    assert changes[-1].args == ("remove", "qos", "where", "name=team-b")


def test_a_user_gets_the_new_default_before_leaving_the_old_one() -> None:
    moved = document(accounts={"team-a": {}, "team-b": {}}, users={"bob": {"Accounts": ["team-b"]}})
    before = applied(document(accounts={"team-a": {}, "team-b": {}}, users={"bob": {"Accounts": ["team-a"]}}))
    assert texts(plan(moved, before)) == ["+ user bob: account team-b",
                                          "~ user bob: DefaultAccount team-a -> team-b",
                                          "- user bob: account team-a"]


def test_a_user_leaving_every_account_leaves_the_default_last() -> None:
    """slurmdbd (from 23.11 on) refuses `remove user ... account=<default>` while the user keeps another
    association ("You can not remove the default account of a user"): the default association goes last,
    whatever the names' order (current.py reads a user's accounts sorted)."""
    teams = document(accounts={"team-a": {}, "team-b": {}})
    for default in ("team-a", "team-b"):
        before = applied(document(accounts={"team-a": {}, "team-b": {}},
                                  users={"bob": {"Accounts": ["team-a", "team-b"], "DefaultAccount": default}}))
        before.users["bob"] = User("bob", ("team-a", "team-b"), default)
        other = "team-b" if default == "team-a" else "team-a"
        assert texts(plan(teams, before)) == [f"- user bob: account {other}", f"- user bob: account {default}"]


def test_a_user_the_stack_drops_moves_its_default_to_an_account_it_keeps() -> None:
    """bob also belongs to an account made by hand: the stack's accounts go, his default moves to that one."""
    before = applied(document(accounts={"team-a": {}}, users={"bob": {"Accounts": ["team-a"]}}))
    before.accounts["ops"] = Account("ops", "made by hand")
    before.users["bob"] = User("bob", ("ops", "team-a"), "team-a")
    changes = plan(document(), before)
    assert texts(changes) == ["~ user bob: DefaultAccount team-a -> ops", "- user bob: account team-a",
                              "- account team-a"]
    assert changes[0].args == ("modify", "user", "where", "name=bob", f"cluster={CLUSTER}", "set",
                               "DefaultAccount=ops")
    after = State(CLUSTER, before.qos, {k: v for k, v in before.accounts.items() if k != "team-a"},
                  {**before.users, "bob": User("bob", ("ops",), "ops")})
    assert plan(document(), after) == []


def test_slurms_own_and_unmanaged_objects_are_never_touched() -> None:
    theirs = State(CLUSTER, {**SLURM_OWN.qos, "debug": Qos("debug", "made by hand")},
                   {**SLURM_OWN.accounts, "ops": Account("ops", "made by hand")},
                   {**SLURM_OWN.users, "carol": User("carol", ("ops",), "ops")})
    assert plan(document(), theirs) == []
    # Even marked as ours, root and normal stay.
    marked = State(CLUSTER, {"normal": Qos("normal", f"x{MARK}")},
                   {"root": Account("root", f"x{MARK}", parent="")}, {})
    assert plan(document(), marked) == []


def test_a_managed_account_with_an_unmanaged_child_is_not_removed() -> None:
    before = applied(document(accounts={"team-a": {}}))
    before.accounts["hand-made"] = Account("hand-made", "by an admin", parent="team-a")
    with pytest.raises(PlanError, match="hand-made"):
        plan(document(), before)


def test_declared_objects_made_by_hand_are_adopted() -> None:
    before = State(CLUSTER, {**SLURM_OWN.qos, "q": Qos("q", "old words", priority=5)}, SLURM_OWN.accounts)
    (change,) = plan(document(qos={"q": {"Description": "New Words", "Priority": 5}}), before)
    assert change.text == f"~ qos q: Description old words -> new words{MARK}"


@pytest.mark.parametrize(("part", "message"), [
    ({"qos": {"normal": {}}}, "Slurm's own default QoS"),
    ({"accounts": {"root": {}}}, "top of Slurm's account tree"),
    ({"accounts": {"a": {"Parent": "nope"}}}, "accounts.a.Parent: no account 'nope'"),
    ({"accounts": {"a": {"QOS": ["nope"]}}}, "accounts.a.QOS: no QoS 'nope'"),
    ({"accounts": {"a": {"DefaultQOS": "nope"}}}, "accounts.a.DefaultQOS: no QoS 'nope'"),
    ({"users": {"u": {"Accounts": ["nope"]}}}, "users.u.Accounts: no account 'nope'"),
    ({"accounts": {"a": {}}, "users": {"u": {"Accounts": ["a"], "DefaultAccount": "b"}}}, "DefaultAccount 'b'"),
    ({"qos": {"q": {"Description": "a|b"}}}, "qos.q.Description: '|'"),
    ({"format": 2}, "format 2"),
])
def test_documents_it_cannot_reconcile(part: dict[str, object], message: str) -> None:
    with pytest.raises(desired.DocumentError, match=message.replace("|", r"\|")):
        document(**part)


def test_load_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "d.json").write_text(json.dumps({"format": 1, "cluster": CLUSTER}))
    assert desired.load(tmp_path / "d.json") == State(CLUSTER)
    with pytest.raises(desired.DocumentError, match=r"missing\.json"):
        desired.load(tmp_path / "missing.json")


@pytest.mark.parametrize(("text", "expected"), [
    ("90", 90), ("1:30", 2), ("01:30:00", 90), ("2-0", 2880), ("2-00:00:00", 2880), ("3-12:30", 5070),
    ("1-00:00:01", 1441), ("UNLIMITED", None), ("-1", None), ("", None)])
def test_minutes_as_sacctmgr_records_them(text: str, expected: int | None) -> None:
    assert values.minutes(text) == expected


def test_times_tres_and_text_as_sacctmgr_prints_and_stores_them() -> None:
    assert [values.show_minutes(m) for m in (2, 90, 2880, 5070, None)] == [
        "00:02:00", "01:30:00", "2-00:00:00", "3-12:30:00", "none"]
    assert values.tres("cpu=8,gres/gpu=1,mem=32G") == {"cpu": 8, "gres/gpu": 1, "mem": 32768}
    assert values.tres("mem=1000000M,gres/gpu=NONE") == {"mem": 1000000}
    assert values.show_tres({"mem": 2, "cpu": 1}) == "cpu=1,mem=2" and values.show_tres({}) == "none"
    assert values.stored_text('  GPU "Team" B\'s ') == "gpu `team` b`s"
    with pytest.raises(ValueError, match="not a Slurm time"):
        values.minutes("1:2:3:4")
