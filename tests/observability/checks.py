"""What the observability tests hold dashboards and rules to, as functions that return the problems found, so
each test can also show them firing on a broken copy."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from components.observability.cloudwatch import CLOUDWATCH_UID
from components.observability.metric_catalog import ALL_NAMES, FSX_LUSTRE, CloudWatchMetrics
from tests.observability.promql import PromQLError, grafana_query_names, metric_names

PROMETHEUS_UID = "prometheus"  # kube-prometheus-stack-88.2.0 values.yaml grafana.sidecar.datasources.uid


def unknown_names(expr: str, names: frozenset[str] = ALL_NAMES, template: bool = False) -> list[str]:
    """Problems with one expression: a syntax the tokenizer rejects, or metric names no exporter documents."""
    try:
        found = grafana_query_names(expr) if template else metric_names(expr)
    except PromQLError as exc:
        return [str(exc)]
    return [f"undocumented metric {name} in {expr!r}" for name in sorted(found - names)]


def panels(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in doc.get("panels", []):
        yield panel
        yield from panel.get("panels", [])  # collapsed rows hold their panels


def cloudwatch_metric_problems(query: dict[str, Any], metrics: CloudWatchMetrics = FSX_LUSTRE) -> list[str]:
    """A CloudWatch metric query (target or dimension-values variable): the documented namespace, metric name and
    dimensions only."""
    problems = []
    if query.get("namespace") != metrics.namespace:
        problems.append(f"namespace {query.get('namespace')!r} is not {metrics.namespace}")
    if query.get("metricName") not in metrics.names:
        problems.append(f"undocumented {metrics.namespace} metric {query.get('metricName')!r}")
    keys = set(query.get("dimensions") or {}) | ({query["dimensionKey"]} if "dimensionKey" in query else set())
    if keys != set(metrics.dimensions):
        problems.append(f"dimensions {sorted(keys)} are not {list(metrics.dimensions)}")
    return problems


def cloudwatch_target_problems(targets: list[dict[str, Any]]) -> list[str]:
    """A panel's CloudWatch targets: each a metric (above) or a metric math expression over the panel's own
    metric ids (github.com/grafana/grafana docs/sources/datasources/aws-cloudwatch/query-editor/index.md)."""
    problems = []
    ids = {t.get("id") for t in targets if not t.get("expression")}
    for target in targets:
        where = f"target {target.get('refId')}"
        if (target.get("datasource") or {}).get("uid", CLOUDWATCH_UID) != CLOUDWATCH_UID:
            problems.append(f"{where}: datasource is not the CloudWatch one")
        if expression := target.get("expression"):
            names = set(re.findall(r"[a-z][A-Za-z0-9_]*", expression))  # ids start lowercase; functions are upper
            problems += [f"{where}: {expression!r} uses {n!r}, no metric of this panel" for n in sorted(names - ids)]
        else:
            problems += [f"{where}: {p}" for p in cloudwatch_metric_problems(target)]
    return problems


def dashboard_problems(doc: dict[str, Any]) -> list[str]:
    problems = [f"no {key}" for key in ("uid", "title") if not doc.get(key)]
    for panel in panels(doc):
        if panel.get("type") == "row":
            continue
        where = f"panel {panel.get('title')!r}"
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no targets")
        uid = (panel.get("datasource") or {}).get("uid")
        if uid == CLOUDWATCH_UID:
            problems += [f"{where}: {p}" for p in cloudwatch_target_problems(targets)]
            continue
        if uid != PROMETHEUS_UID:
            problems.append(f"{where}: datasource is neither the Prometheus nor the CloudWatch one")
        for target in targets:
            if not target.get("expr"):
                problems.append(f"{where}: target {target.get('refId')} has no expr")
            problems += [f"{where}: {p}" for p in unknown_names(target.get("expr") or "")]
    for variable in doc.get("templating", {}).get("list", []):
        query = variable.get("query")
        if (variable.get("datasource") or {}).get("uid") == CLOUDWATCH_UID:
            problems += [f"variable {variable['name']}: {p}" for p in cloudwatch_metric_problems(query or {})]
            continue
        query = query.get("query") if isinstance(query, dict) else query
        if variable.get("type") == "query" and query:
            problems += [f"variable {variable['name']}: {p}" for p in unknown_names(query, template=True)]
    return problems


def rule_problems(groups: list[dict[str, Any]]) -> list[str]:
    problems = []
    for group in groups:
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            if not name or not rule.get("expr"):
                problems.append(f"group {group['name']}: a rule without a name or expr")
                continue
            problems += [f"{name}: {p}" for p in unknown_names(rule["expr"])]
    return problems
