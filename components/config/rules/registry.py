"""The rule registry every domain module registers into: a rule yields what it found (`Found`: path, value,
message, fix), the registry stamps each with the rule's name and severity into the one finding type
(components/findings.py). Helpers several domains share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from components import catalog
from components.config.cluster import ClusterConfig
from components.config.k8s_pools import NodeGroup
from components.config.stack_context import NO_STACK, StackContext
from components.findings import Finding, Severity

MAX_PARTITION_NAME = 40  # leaves room for the prefixes of NodePool/NodeSet/Service names (63 chars)
K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Found:
    """What a validator yields: where and what, without the rule's name and severity the registry adds."""

    path: str
    value: Any
    message: str
    fix: str
    severity: Severity | None = None  # None: the rule's own; a waiver may lower one finding to a warning


Validator = Callable[[ClusterConfig], Iterator[Found]]
StackValidator = Callable[[ClusterConfig, StackContext], Iterator[Found]]
VALIDATORS: dict[str, tuple[Severity, Validator | StackValidator]] = {}
STACK_AWARE: set[str] = set()  # rules called with the StackContext too (stack_rule)


def rule(name: str, severity: Severity = "error") -> Callable[[Validator], Validator]:
    def register(fn: Validator) -> Validator:
        VALIDATORS[name] = (severity, fn)
        return fn

    return register


def stack_rule(name: str, severity: Severity = "error") -> Callable[[StackValidator], StackValidator]:
    """A rule that also reads the stack around the config (its name, siblings, pack config: StackContext)."""
    def register(fn: StackValidator) -> StackValidator:
        VALIDATORS[name] = (severity, fn)
        STACK_AWARE.add(name)
        return fn

    return register


# The order problems are reported in: the config file's own order, roughly (a rule's place within its domain is
# its place in the module).
DOMAINS = ("cluster", "network", "storage", "login", "slurm", "partitions", "pools", "addons", "mlflow", "health",
           "teams")


def _domain(fn: Validator | StackValidator) -> int:
    name = fn.__module__.rpartition(".")[2]
    return DOMAINS.index(name) if name in DOMAINS else len(DOMAINS)


def run_validators(config: ClusterConfig, stack: StackContext = NO_STACK) -> list[Finding]:
    """Every registered rule's findings (import components.config.rules to register them all)."""
    ordered = sorted(VALIDATORS.items(), key=lambda item: _domain(item[1][1]))  # stable: keeps module order
    return [Finding(rule=name, severity=f.severity or severity, path=f.path, value=f.value, message=f.message,
                    fix=f.fix)
            for name, (severity, fn) in ordered for f in _found(name, fn, config, stack)]


def _found(name: str, fn: Validator | StackValidator, config: ClusterConfig, stack: StackContext) -> Iterator[Found]:
    if name in STACK_AWARE:
        return fn(config, stack)  # type: ignore[call-arg]
    return fn(config)  # type: ignore[call-arg]


def known_types(p: NodeGroup) -> list[catalog.InstanceType]:
    return [catalog.CATALOG[t] for t in p.instance_types if t in catalog.CATALOG]


def node_groups(c: ClusterConfig) -> Iterator[tuple[str, NodeGroup]]:
    """Every partition and Kubernetes pool with its config path: one builder makes their nodes, so the same
    rules hold for both."""
    yield from ((f"partitions.{name}", p) for name, p in c.partitions.items())
    yield from ((f"kubernetesPools.{name}", p) for name, p in c.kubernetes_pools.items())
