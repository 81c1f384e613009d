"""slurm/agent/metrics.py: the contract's metrics as prometheus_client serves them, read back with its own parser
of the text format, and held to exactly the names and labels in slurm/agent/contract.py (dashboards and alert
rules use those: tests/observability)."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurm.agent import contract as m
from slurm.agent.metrics import Registry, serve


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture
def served() -> Iterator[tuple[Registry, str]]:
    registry = Registry()
    server, thread = serve(registry, "127.0.0.1", 0)
    try:
        yield registry, f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return reply.read().decode()


def test_served_names_labels_and_values(served: tuple[Registry, str]) -> None:
    registry, url = served
    registry.inc(m.REPLACEMENTS, {"partition": "gpu-h100", "check": "xid"})
    registry.inc(m.REPLACEMENTS, {"partition": "gpu-h100", "check": "xid"})
    registry.set(m.NODES_DRAINED_BY_PERSON, {"partition": 'we"ird\\part\nition'}, 3)
    registry.set(m.LAST_PASS, {}, 1_800_000_000.5)
    registry.inc(m.REPAIR_ERRORS, {"step": "get-pod"})
    text = scrape(url)
    parsed = families(text)
    # the parser names a counter family without its _total; the sample keeps the contract's name
    replaced = parsed["slurm_eks_repair_replacements"]
    assert replaced.type == "counter" and replaced.documentation == m.REPLACEMENTS.help
    (sample,) = replaced.samples
    assert (sample.name, sample.labels, sample.value) == (m.REPLACEMENTS.name, {"partition": "gpu-h100",
                                                                                "check": "xid"}, 2)
    (person,) = parsed[m.NODES_DRAINED_BY_PERSON.name].samples
    assert person.labels == {"partition": 'we"ird\\part\nition'} and person.value == 3
    assert parsed[m.LAST_PASS.name].samples[0].value == 1_800_000_000.5
    assert parsed["slurm_eks_repair_errors"].samples[0].labels == {"step": "get-pod"}
    # every contract metric is declared under its own name, and no series but the contract's is exposed
    # (prometheus_client's Counter would add <name>_created; dashboards know only these)
    assert {f"# TYPE {x.name} {x.kind}" for x in m.ALL} <= set(text.splitlines())
    assert sample_names(text) == {m.REPLACEMENTS.name, m.NODES_DRAINED_BY_PERSON.name, m.LAST_PASS.name,
                                  m.REPAIR_ERRORS.name}
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            contract = next(x for x in m.ALL if x.name == s.name)
            assert set(s.labels) == set(contract.labels)


def test_wrong_labels_and_kinds_are_refused() -> None:
    registry = Registry()
    with pytest.raises(ValueError):
        registry.inc(m.REPLACEMENTS, {"partition": "p"})
    with pytest.raises(ValueError):
        registry.set(m.REPLACEMENTS, {"partition": "p", "check": "c"}, 1)
    with pytest.raises(ValueError):
        registry.inc(m.REPAIR_ERRORS, {"step": "s"}, by=-1)
    with pytest.raises(ValueError):
        registry.replace(m.REPAIR_ERRORS, [])


def test_clear_drops_gone_series() -> None:
    registry = Registry()
    registry.set(m.NODES_DRAINED, {"partition": "p", "check": "xid"}, 1)
    registry.clear(m.NODES_DRAINED)
    assert families(registry.render())[m.NODES_DRAINED.name].samples == []
    assert registry.value(m.NODES_DRAINED, {"partition": "p", "check": "xid"}) == 0


def test_two_registries_do_not_share_series() -> None:
    # each controller (and each test) has its own CollectorRegistry, not prometheus_client's global one
    first, second = Registry(), Registry()
    first.inc(m.REPAIR_ERRORS, {"step": "s"})
    assert second.value(m.REPAIR_ERRORS, {"step": "s"}) == 0


def test_a_scrape_sees_the_old_set_or_the_new_one_never_half(served: tuple[Registry, str]) -> None:
    registry, url = served
    old = [({"partition": "p", "node": f"old-{i}", "check": "nccl"}, 1.0) for i in range(200)]
    new = [({"partition": "p", "node": f"new-{i}", "check": "nccl"}, 2.0) for i in range(200)]
    registry.replace(m.BUS_BANDWIDTH, old)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            registry.replace(m.BUS_BANDWIDTH, new)
            registry.replace(m.BUS_BANDWIDTH, old)

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    try:
        for _ in range(20):
            samples = families(scrape(url))[m.BUS_BANDWIDTH.name].samples
            nodes = {s.labels["node"].split("-")[0] for s in samples}
            assert len(samples) == 200 and nodes in ({"old"}, {"new"})
    finally:
        stop.set()
        flipper.join(5)
