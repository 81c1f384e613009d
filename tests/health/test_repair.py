"""repair.decide: each rule with a case that would break it."""

from __future__ import annotations

from slurm.agent.health.ledger import Entry
from slurm.agent.health.nodes import SlurmNode
from slurm.agent.health.reasons import drain_reason
from slurm.agent.health.repair import Policy, decide

NOW = 1_800_000_000.0
POLICY = Policy(max_per_hour=2)


def node(name: str, *states: str, reason: str = "", alloc: int = 0, part: str = "gpu-h100",
         at: int = 1_799_990_000) -> SlurmNode:
    return SlurmNode(name, frozenset(states), alloc, reason, "slurm", at, (part, "all"), ())


def ours(check: str = "xid") -> str:
    return drain_reason(check, "Xid 79 on GPU 3")


def kinds(nodes: list[SlurmNode], history: list[Entry] | None = None) -> dict[str, tuple[str, str]]:
    return {d.node: (d.kind, d.why) for d in decide(nodes, history or [], NOW, POLICY)}


def test_person_drained_is_ignored_whatever_else() -> None:
    assert kinds([node("a", "IDLE", "DRAIN", reason="fan noisy, checking"),
                  node("b", "IDLE", "DRAIN", reason="slurm-eks:missing-space"),
                  node("c", "IDLE", reason=ours())]) == {
        "a": ("ignore", "person"), "b": ("ignore", "person"), "c": ("ignore", "not-drained")}


def test_draining_waits_then_drained_is_replaced() -> None:
    assert kinds([node("a", "MIXED", "DRAIN", reason=ours(), alloc=4)]) == {"a": ("wait", "jobs-running")}
    decision = decide([node("a", "IDLE", "DRAIN", reason=ours("ecc"))], [], NOW, POLICY)[0]
    assert (decision.kind, decision.partition, decision.check) == ("replace", "gpu-h100", "ecc")


def test_third_in_an_hour_is_held_oldest_first() -> None:
    nodes = [node(f"gpu-h100-{i}", "IDLE", "DRAIN", reason=ours(), at=1_799_990_000 - i) for i in range(3)]
    assert kinds(nodes) == {"gpu-h100-2": ("replace", "drained"), "gpu-h100-1": ("replace", "drained"),
                            "gpu-h100-0": ("hold", "rate-limit")}


def test_history_counts_per_partition_in_a_rolling_hour() -> None:
    history = [Entry("gpu-h100", "gpu-h100-7", "xid", "nc-1", NOW - 3000),
               Entry("gpu-h100", "gpu-h100-8", "xid", "nc-2", NOW - 100),
               Entry("trn2", "trn2-0", "neuron", "nc-3", NOW - 100)]
    assert kinds([node("gpu-h100-0", "IDLE", "DRAIN", reason=ours())], history) == {
        "gpu-h100-0": ("hold", "rate-limit")}
    # an hour later the first entry is out of the window; another partition's entries never counted
    later = decide([node("gpu-h100-0", "IDLE", "DRAIN", reason=ours()),
                    node("p5-0", "IDLE", "DRAIN", reason=ours(), part="p5")], history, NOW + 700, POLICY)
    assert [(d.node, d.kind) for d in later] == [("gpu-h100-0", "replace"), ("p5-0", "replace")]


def test_node_replaced_in_the_last_half_hour_is_held() -> None:
    history = [Entry("gpu-h100", "gpu-h100-0", "xid", "nc-1", NOW - 1700)]
    assert kinds([node("gpu-h100-0", "IDLE", "DRAIN", reason=ours())], history) == {
        "gpu-h100-0": ("hold", "replaced-recently")}
    assert decide([node("gpu-h100-0", "IDLE", "DRAIN", reason=ours())], history, NOW + 200, POLICY)[0].kind == \
        "replace"


def test_the_windows_end_exactly_an_hour_and_half_an_hour_back() -> None:
    """A replacement 3600 s ago no longer counts, 3599 s ago it does; the same for the 1800 s 'recently'."""
    def entry(node: str, age: float) -> Entry:
        return Entry("gpu-h100", node, "xid", "nc", NOW - age)

    drained = [node("gpu-h100-0", "IDLE", "DRAIN", reason=ours())]
    one = Policy(max_per_hour=1)
    assert decide(drained, [entry("gpu-h100-9", 3599)], NOW, one)[0].why == "rate-limit"
    assert decide(drained, [entry("gpu-h100-9", 3600)], NOW, one)[0].kind == "replace"
    assert decide(drained, [entry("gpu-h100-0", 1799)], NOW, POLICY)[0].why == "replaced-recently"
    assert decide(drained, [entry("gpu-h100-0", 1800)], NOW, POLICY)[0].kind == "replace"
    assert (Policy(max_per_hour=1).window_seconds, Policy(max_per_hour=1).recent_seconds) == (3600, 1800)


def test_a_bound_already_exceeded_still_holds_and_one_per_hour_replaces_one() -> None:
    """max lowered after a busy hour (3 in the window, max 2): still held; max 1 with no history: one goes."""
    history = [Entry("gpu-h100", f"gpu-h100-{i}", "xid", "nc", NOW - 100) for i in (7, 8, 9)]
    assert kinds([node("gpu-h100-0", "IDLE", "DRAIN", reason=ours())], history) == {
        "gpu-h100-0": ("hold", "rate-limit")}
    two = [node(f"gpu-h100-{i}", "IDLE", "DRAIN", reason=ours(), at=1_799_990_000 + i) for i in range(2)]
    assert [(d.node, d.kind) for d in decide(two, [], NOW, Policy(max_per_hour=1))] == [
        ("gpu-h100-0", "replace"), ("gpu-h100-1", "hold")]


def test_a_drained_node_without_a_reason_time_comes_last() -> None:
    timeless = SlurmNode("gpu-h100-0", frozenset({"IDLE", "DRAIN"}), 0, ours(), "slurm", None, ("gpu-h100",))
    dated = node("gpu-h100-1", "IDLE", "DRAIN", reason=ours(), at=1)
    assert [d.node for d in decide([timeless, dated], [], NOW, Policy(max_per_hour=1))] == [
        "gpu-h100-1", "gpu-h100-0"]
