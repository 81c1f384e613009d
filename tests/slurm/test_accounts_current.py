"""Reading what slurmdbd holds: real `sacctmgr --noheader --parsable2 show ...` output, parsed into the model.

The fixtures in data/sacctmgr/ are real sacctmgr output (Debian's Slurm 22.05.8 on the local cluster), captured
with the commands slurm/agent/accounts/current.py runs right after tests/slurm/test_accounts_slurm.py's stack was
applied (data/sacctmgr/README.md says how). No Slurm is needed to run these tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.slinky.accounts_document import desired_document
from slurm.agent.accounts import current, desired
from slurm.agent.accounts.model import Account, Qos, State, User
from slurm.agent.accounts.plan import plan
from slurm.agent.accounts.values import MARKER
from tests.slurm.accounts_stack import stack

DATA = Path(__file__).resolve().parent / "data" / "sacctmgr"


def captured(name: str) -> str:
    return (DATA / f"show_{name}.txt").read_text()


@pytest.fixture(scope="module")
def state() -> State:
    associations = captured("association")
    return State("local", current.parse_qos(captured("qos")),
                 current.parse_accounts(captured("account"), associations),
                 current.parse_users(associations, captured("association_onlydefaults")))


def test_qos_limits_times_and_slurms_own(state: State) -> None:
    assert state.qos["sek-a"] == Qos("sek-a", f"sek-a {MARKER}", priority=10, grp_tres={"gres/gpu": 2},
                                     max_tres_per_user={"gres/gpu": 1}, max_wall=60)
    assert state.qos["sek-b"] == Qos("sek-b", f"sek-b {MARKER}", priority=10, grp_tres={"gres/gpu": 1})
    assert state.qos["normal"].description == "Normal QOS default"  # made by slurmdbd, not lower-cased


def test_accounts_with_their_own_settings_and_mem_in_mib(state: State) -> None:
    assert state.accounts["sek-research"] == Account(
        "sek-research", f"research {MARKER}", parent="root", organization="sek-research",
        grp_tres={"cpu": 64, "mem": 65536})  # printed as mem=64G; no QOS of its own (WOPLimits): inherited
    assert state.accounts["sek-b"] == Account("sek-b", f"sek-b {MARKER}", parent="sek-research",
                                              organization="sek-research", fairshare=2,
                                              qos=frozenset({"sek-b"}), default_qos="sek-b")
    assert state.accounts["root"].parent == "" and state.accounts["root"].qos == frozenset({"normal"})


def test_users_their_associations_and_defaults(state: State) -> None:
    assert state.users["sek-bob"] == User("sek-bob", ("sek-a", "sek-b"), "sek-a")
    assert state.users["sek-carol"] == User("sek-carol", ("sek-b",), "sek-b")
    assert state.users["root"] == User("root", ("root",), "root")


def test_what_the_reconcile_wrote_reads_back_as_nothing_to_do(state: State) -> None:
    assert plan(desired.state(desired_document(stack(), "local")), state) == []


def test_a_description_with_the_separator_stays_whole() -> None:
    # The free-text field is read last, so a '|' typed into it by hand does not shift the fields.
    (qos,) = current.parse_qos("odd|0|||||||a|b\n").values()
    assert qos.description == "a|b"
