"""repair_pass end to end, through the official kubernetes client, against the local Kubernetes API stand-in
(tests/health/kube_api.py: Pods, NodeClaims shaped by the Karpenter CRD, the ledger ConfigMap with resourceVersion
conflicts) and Slurm nodes parsed from the v0.0.44
fixture (data/nodes-v0.0.44.json, schema-checked in test_nodes.py) or served by the fake slurmrestd."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurm.agent import contract as m
from slurm.agent.health.controller import log_json, repair_pass
from slurm.agent.health.ledger import KEY, ConfigMapLedger, Entry, from_data, prune, to_data
from slurm.agent.health.nodes import SlurmNode, parse_nodes
from slurm.agent.health.reasons import drain_reason
from slurm.agent.health.repair import Policy
from slurm.agent.health.slurm_access import SlurmError
from slurm.agent.metrics import Registry
from tests.health.kube_api import ApiServer, nodeclaim, pod

DATA = Path(__file__).parent / "data"
NOW = 1_796_200_000.0
POLICY = Policy(max_per_hour=2)


class FixedSlurm:
    """SlurmAccess returning fixed nodes (parsed from the schema-valid fixture, or edited copies of them)."""

    def __init__(self, nodes: list[SlurmNode] | None = None, error: Exception | None = None) -> None:
        self._nodes = nodes if nodes is not None else parse_nodes(json.loads((DATA / "nodes-v0.0.44.json").read_text()))
        self.error = error

    def nodes(self) -> list[SlurmNode]:
        if self.error:
            raise self.error
        return list(self._nodes)

    def drain(self, node: str, reason: str) -> None:
        raise AssertionError("the controller never drains")

    def submit(self, script: str, partition: str, nodelist: str, job_name: str) -> int:
        raise AssertionError("the controller never submits")

    def job_state(self, job_id: int) -> str | None:
        raise AssertionError("the controller never polls jobs")


def drained(name: str, at: int) -> SlurmNode:
    return SlurmNode(name, frozenset({"IDLE", "DRAIN"}), 0, drain_reason("ecc", "uncorrectable ECC"), "slurm", at,
                     ("gpu-h100", "all"))


@pytest.fixture
def fake() -> Iterator[ApiServer]:
    kube = ApiServer()
    for i in range(6):
        name, k8s = f"gpu-h100-{i}", f"ip-10-0-1-{20 + i}.ec2.internal"
        kube.pods[name] = pod(name, k8s)
        kube.nodeclaims[f"gpu-h100-nc{i}"] = nodeclaim(f"gpu-h100-nc{i}", k8s)
    yield kube
    kube.close()


class Run:
    def __init__(self, fake: ApiServer, tmp_path: Path) -> None:
        self.kube = fake.client()
        self.ledger = ConfigMapLedger(self.kube)
        self.metrics = Registry()
        self.logs: list[dict[str, Any]] = []

    def __call__(self, slurm: Any, now: float = NOW, **kw: Any) -> dict[str, tuple[str, str]]:
        decisions = repair_pass(slurm, self.kube, self.ledger, POLICY, self.metrics, now, log=self.logs.append, **kw)
        return {d.node: (d.kind, d.why) for d in decisions}


def test_replaces_ours_waits_for_jobs_never_touches_a_persons(fake: ApiServer, tmp_path: Path) -> None:
    run = Run(fake, tmp_path)
    assert run(FixedSlurm()) == {"gpu-h100-0": ("replace", "drained"), "gpu-h100-1": ("wait", "jobs-running"),
                                 "gpu-h100-2": ("ignore", "person")}
    # the ledger read, the pod's node, the NodeClaims, the ledger written (created: it did not exist), the delete
    assert fake.calls() == [("GET", "/api/v1/namespaces/slurm/configmaps/slurm-eks-repair-ledger"),
                            ("GET", "/api/v1/namespaces/slurm/pods/gpu-h100-0"),
                            ("GET", "/apis/karpenter.sh/v1/nodeclaims"),
                            ("POST", "/api/v1/namespaces/slurm/configmaps"),
                            ("DELETE", "/apis/karpenter.sh/v1/nodeclaims/gpu-h100-nc0")]
    (entry,) = from_data(fake.configmaps[("slurm", "slurm-eks-repair-ledger")]["data"])
    assert entry == Entry("gpu-h100", "gpu-h100-0", "gpu-count", "gpu-h100-nc0", NOW)
    metrics = run.metrics
    assert metrics.value(m.REPLACEMENTS, {"partition": "gpu-h100", "check": "gpu-count"}) == 1
    assert metrics.value(m.REPAIRS_HELD, {"partition": "gpu-h100", "why": "jobs-running"}) == 1
    assert metrics.value(m.NODES_DRAINED, {"partition": "gpu-h100", "check": "xid"}) == 1
    assert metrics.value(m.NODES_DRAINED_BY_PERSON, {"partition": "gpu-h100"}) == 1
    assert metrics.value(m.LAST_PASS) == NOW
    events = [(log["event"], log["node"]) for log in run.logs]
    assert events == [("replace", "gpu-h100-0"), ("wait", "gpu-h100-1"), ("ignore", "gpu-h100-2")]
    assert all(json.dumps(log) for log in run.logs)


def test_person_drained_is_never_deleted_even_with_a_nodeclaim(fake: ApiServer, tmp_path: Path) -> None:
    person = SlurmNode("gpu-h100-2", frozenset({"IDLE", "DRAIN"}), 0, "slurm-eks maintenance by bob", "bob", 1,
                       ("gpu-h100",))
    run = Run(fake, tmp_path)
    for minute in range(3):
        run(FixedSlurm([person]), NOW + 3600 * minute)
    assert fake.deletes() == [] and ("slurm", "slurm-eks-repair-ledger") not in fake.configmaps


def test_third_in_an_hour_is_held_and_a_restarted_controller_holds_too(fake: ApiServer, tmp_path: Path) -> None:
    nodes = [drained(f"gpu-h100-{i}", 1_796_190_000 + i) for i in range(3)]
    assert Run(fake, tmp_path)(FixedSlurm(nodes)) == {
        "gpu-h100-0": ("replace", "drained"), "gpu-h100-1": ("replace", "drained"),
        "gpu-h100-2": ("hold", "rate-limit")}
    assert len(fake.deletes()) == 2
    # the second write carries the resourceVersion the first one got back
    first_write, second_write = [r for r in fake.requests if r.method in ("POST", "PUT")]
    assert (first_write.method, second_write.method) == ("POST", "PUT")
    assert second_write.path == "/api/v1/namespaces/slurm/configmaps/slurm-eks-repair-ledger"
    assert second_write.body["metadata"]["resourceVersion"] not in (None, "")
    # a second instance (restart: fresh ledger object and metrics) reads the same ConfigMap
    second = Run(fake, tmp_path)
    assert second(FixedSlurm([*nodes, drained("gpu-h100-3", 1_796_190_010)]), NOW + 600) == {
        "gpu-h100-0": ("hold", "replaced-recently"), "gpu-h100-1": ("hold", "replaced-recently"),
        "gpu-h100-2": ("hold", "rate-limit"), "gpu-h100-3": ("hold", "rate-limit")}
    assert len(fake.deletes()) == 2
    assert second.metrics.value(m.REPAIRS_HELD, {"partition": "gpu-h100", "why": "rate-limit"}) == 2
    # past the hour the bound frees up again
    assert Run(fake, tmp_path)(FixedSlurm([nodes[2]]), NOW + 3601) == {"gpu-h100-2": ("replace", "drained")}


def test_two_controllers_at_once_cannot_both_take_the_last_slot(fake: ApiServer, tmp_path: Path) -> None:
    first, second = Run(fake, tmp_path), Run(fake, tmp_path)
    fake.configmaps[("slurm", "slurm-eks-repair-ledger")] = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "slurm-eks-repair-ledger", "namespace": "slurm", "resourceVersion": "5"},
        "data": to_data([Entry("gpu-h100", "gpu-h100-5", "xid", "gpu-h100-nc5", NOW - 60)])}
    read_history = second.ledger.load

    def first_acts_between_our_read_and_write() -> list[Entry]:
        history = read_history()
        assert first(FixedSlurm([drained("gpu-h100-0", 1)])) == {"gpu-h100-0": ("replace", "drained")}
        return history

    second.ledger.load = first_acts_between_our_read_and_write  # type: ignore[method-assign]
    # one slot left (max 2, one in the ledger): both decide to replace; only the first write may land
    assert second(FixedSlurm([drained("gpu-h100-1", 2)])) == {"gpu-h100-1": ("hold", "ledger-conflict")}
    assert fake.deletes() == ["/apis/karpenter.sh/v1/nodeclaims/gpu-h100-nc0"]


def test_no_nodeclaim_or_no_pod_is_held_and_counted(fake: ApiServer, tmp_path: Path) -> None:
    del fake.nodeclaims["gpu-h100-nc0"]
    del fake.pods["gpu-h100-1"]
    run = Run(fake, tmp_path)
    assert run(FixedSlurm([drained("gpu-h100-0", 1), drained("gpu-h100-1", 2)])) == {
        "gpu-h100-0": ("hold", "no-nodeclaim"), "gpu-h100-1": ("hold", "no-pod")}
    assert fake.deletes() == [] and ("slurm", "slurm-eks-repair-ledger") not in fake.configmaps
    assert run.metrics.value(m.REPAIRS_HELD, {"partition": "gpu-h100", "why": "no-nodeclaim"}) == 1
    assert run.metrics.value(m.REPAIRS_HELD, {"partition": "gpu-h100", "why": "no-pod"}) == 1


def test_api_errors_are_counted_and_the_pass_goes_on(fake: ApiServer, tmp_path: Path) -> None:
    fake.fail[("GET", r"/api/v1/namespaces/slurm/pods/gpu-h100-0")] = 500
    fake.fail[("DELETE", r"/apis/karpenter.sh/v1/nodeclaims/gpu-h100-nc1")] = 500
    run = Run(fake, tmp_path)
    nodes = [drained("gpu-h100-0", 1), drained("gpu-h100-1", 2)]
    assert run(FixedSlurm(nodes)) == {"gpu-h100-0": ("hold", "error"), "gpu-h100-1": ("hold", "error")}
    assert run.metrics.value(m.REPAIR_ERRORS, {"step": "get-pod"}) == 1
    assert run.metrics.value(m.REPAIR_ERRORS, {"step": "delete-nodeclaim"}) == 1
    assert [log["step"] for log in run.logs if log["event"] == "error"] == ["get-pod", "delete-nodeclaim"]
    assert run.metrics.value(m.LAST_PASS) == NOW  # the pass finished
    # Slurm unreachable, then the ledger unreadable: counted, nothing deleted, no exception
    assert run(FixedSlurm(error=SlurmError("slurm_load_node error: Unable to contact slurm controller"))) == {}
    fake.fail[("GET", r"/api/v1/namespaces/slurm/configmaps/.*")] = 500
    assert run(FixedSlurm([drained("gpu-h100-3", 3)])) == {}
    assert run.metrics.value(m.REPAIR_ERRORS, {"step": "slurm-nodes"}) == 1
    assert run.metrics.value(m.REPAIR_ERRORS, {"step": "ledger-read"}) == 1
    assert fake.deletes() == ["/apis/karpenter.sh/v1/nodeclaims/gpu-h100-nc1"]  # the one refused with 500


def test_dry_run_logs_without_deleting(fake: ApiServer, tmp_path: Path) -> None:
    run = Run(fake, tmp_path)
    assert run(FixedSlurm([drained("gpu-h100-0", 1)]), dry_run=True) == {"gpu-h100-0": ("replace", "dry-run")}
    assert fake.deletes() == [] and ("slurm", "slurm-eks-repair-ledger") not in fake.configmaps
    assert run.logs[0]["event"] == "replace-dry-run" and run.logs[0]["nodeclaim"] == "gpu-h100-nc0"
    assert run.metrics.value(m.REPLACEMENTS, {"partition": "gpu-h100", "check": "ecc"}) == 0


def test_ledger_round_trip_and_prune() -> None:
    old = Entry("gpu-h100", "gpu-h100-0", "xid", "nc-0", NOW - 25 * 3600)
    new = Entry("gpu-h100", "gpu-h100-1", "ecc", "nc-1", NOW - 60)
    assert from_data(to_data([old, new])) == [old, new]
    assert prune([new, old], NOW) == [new]
    assert list(to_data([])) == [KEY] and from_data(None) == []


def test_log_json_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    log_json({"event": "replace", "detail": "two\nlines"})
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out)["detail"] == "two\nlines"

