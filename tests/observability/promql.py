"""Metric names in a PromQL expression, without a parser dependency: a tokenizer that drops what is not a
metric name (strings, label matchers, range and subquery brackets, grouping label lists, Grafana variables,
numbers and durations, keywords), then takes identifiers not followed by `(` as names and those followed by `(`
as functions, which must be PromQL's."""

from __future__ import annotations

import re

# prometheus/prometheus promql/parser/functions.go and lex.go (aggregators), the ones a dashboard might use.
FUNCTIONS = frozenset({
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "count_over_time", "day_of_month", "day_of_week", "days_in_month", "delta", "deriv", "exp", "floor",
    "histogram_quantile", "holt_winters", "idelta", "increase", "irate", "label_join", "label_replace",
    "last_over_time", "ln", "log2", "log10", "max_over_time", "min_over_time", "predict_linear",
    "present_over_time", "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc",
    "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "time", "timestamp", "vector", "hour",
    "minute", "month", "year",
    # aggregation operators
    "sum", "avg", "min", "max", "count", "count_values", "group", "stddev", "stdvar", "topk", "bottomk", "quantile",
})
KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and",
                      "or", "unless", "atan2", "inf", "nan", "start", "end"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VAR = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[\w+\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_NUMBER = re.compile(r"(?<![\w:])(0x[0-9a-fA-F]+|\d[\w.]*)")  # 1, 0.5, 1e3, and durations: 5m, 1h30m
_IDENT = re.compile(r"[A-Za-z_:][\w:]*")
_AGGREGATION_GROUPING = re.compile(r"(by|without)\b")


class PromQLError(ValueError):
    pass


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects; raises PromQLError on an unknown function or unbalanced brackets."""
    text = _STRING.sub('""', expr)
    text = _GRAFANA_VAR.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(r"\1", text)
    text = _NUMBER.sub(" ", text)
    if any(c in text for c in "{}[]") or text.count("(") != text.count(")"):
        raise PromQLError(f"unbalanced brackets in {expr!r}")
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        word, rest = match.group(), text[match.end():].lstrip()
        if word in KEYWORDS:
            continue
        if rest.startswith("(") or _AGGREGATION_GROUPING.match(rest):  # `sum by (x) (...)`
            if word not in FUNCTIONS:
                raise PromQLError(f"unknown function {word}() in {expr!r}")
            continue
        names.add(word)
    return names


_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<expr>.+?)\s*,\s*)?(?P<label>\w+)\s*\)\s*$", re.S)


def grafana_query_names(query: str) -> set[str]:
    """A Grafana template query: `label_values(expr, label)` (or `label_values(label)`), else PromQL."""
    match = _LABEL_VALUES.match(query)
    if match:
        return metric_names(match["expr"]) if match["expr"] else set()
    return metric_names(query)
