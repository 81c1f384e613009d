"""metrics.Registry's text, read back with the Prometheus client's own parser of format 0.0.4, and /metrics."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from slurm.agent import contract as m
from slurm.health.metrics import CONTENT_TYPE, Registry, serve
from tests.conftest import require_module

parser = require_module("prometheus_client.parser", "prometheus_client")


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_text_parses_with_help_type_and_escaped_labels() -> None:
    registry = Registry()
    registry.inc(m.REPLACEMENTS, {"partition": "gpu-h100", "check": "xid"})
    registry.inc(m.REPLACEMENTS, {"partition": "gpu-h100", "check": "xid"})
    registry.set(m.NODES_DRAINED_BY_PERSON, {"partition": 'we"ird\\part\nition'}, 3)
    registry.set(m.LAST_PASS, {}, 1_800_000_000.5)
    text = registry.render()
    parsed = families(text)
    # the parser names a counter family without its _total suffix
    replaced = parsed["slurm_eks_repair_replacements"]
    assert replaced.type == "counter" and replaced.documentation == m.REPLACEMENTS.help
    (sample,) = [s for s in replaced.samples if s.name.endswith("_total")]
    assert sample.labels == {"partition": "gpu-h100", "check": "xid"} and sample.value == 2
    (person,) = parsed[m.NODES_DRAINED_BY_PERSON.name].samples
    assert person.labels == {"partition": 'we"ird\\part\nition'} and person.value == 3
    assert parsed[m.LAST_PASS.name].samples[0].value == 1_800_000_000.5
    assert {f"# TYPE {x.name} {x.kind}" for x in m.ALL} <= set(text.splitlines())


def test_unescaped_label_would_not_parse() -> None:
    # the breaking case for the escaping: the same sample written raw is not format 0.0.4
    raw = '# TYPE x gauge\nx{partition="we"ird"} 1\n'
    with pytest.raises(ValueError):
        list(parser.text_string_to_metric_families(raw))


def test_wrong_labels_and_kinds_are_refused() -> None:
    registry = Registry()
    with pytest.raises(ValueError):
        registry.inc(m.REPLACEMENTS, {"partition": "p"})
    with pytest.raises(ValueError):
        registry.set(m.REPLACEMENTS, {"partition": "p", "check": "c"}, 1)
    with pytest.raises(ValueError):
        registry.inc(m.REPAIR_ERRORS, {"step": "s"}, by=-1)


def test_clear_drops_gone_series() -> None:
    registry = Registry()
    registry.set(m.NODES_DRAINED, {"partition": "p", "check": "xid"}, 1)
    registry.clear(m.NODES_DRAINED)
    assert families(registry.render())[m.NODES_DRAINED.name].samples == []


def test_metrics_endpoint() -> None:
    registry = Registry()
    registry.inc(m.REPAIR_ERRORS, {"step": "get-pod"})
    server = serve(registry, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(url + "/metrics", timeout=5) as reply:
            assert reply.headers["Content-Type"] == CONTENT_TYPE
            parsed = families(reply.read().decode())
        assert parsed["slurm_eks_repair_errors"].samples[0].labels == {"step": "get-pod"}
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url + "/other", timeout=5)
    finally:
        server.shutdown()
        server.server_close()
