"""The NetworkPolicy evaluator of the pod-network rule, one semantic at a time (networking.k8s.io/v1)."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.checks.pod_flows import Address, Cluster, Flow, Pod, evaluate

VPC = "10.0.0.0/16"
WEB = Pod("web", "app", {"app": "web"}, {"http": 8080})
DB = Pod("db", "data", {"app": "db"}, {"sql": 5432})
OTHER = Pod("other", "data", {"app": "other"})


def netpol(namespace: str, selector: dict[str, Any], ingress: list[Any] | None = None,
           egress: list[Any] | None = None, types: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": selector}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    if types is not None:
        spec["policyTypes"] = types
    return {"metadata": {"name": "p", "namespace": namespace}, "spec": spec}


def allows(policies: list[dict[str, Any]], flow: Flow, certain: bool = True,
           namespaces: dict[str, dict[str, str]] | None = None) -> bool:
    return Cluster(tuple(policies), namespaces or {}, (VPC,)).allows(flow, certain)


def to_db(port: int = 5432, who: Pod | Address = WEB, protocol: str = "TCP") -> Flow:
    return Flow(who, DB, protocol, (port, port), "web queries db")


DENY_DB = netpol("data", {}, [], [], ["Ingress", "Egress"])


def test_no_policy_allows_everything() -> None:
    assert allows([], to_db())


def test_a_policy_selecting_the_pod_isolates_it() -> None:
    assert not allows([DENY_DB], to_db())
    # ...but only the pods it selects
    assert allows([netpol("data", {"matchLabels": {"app": "other"}}, [], types=["Ingress"])], to_db())


def test_policy_types_default_to_ingress_plus_egress_when_it_has_egress_rules() -> None:
    only_ingress = netpol("app", {}, ingress=[])  # policyTypes unset, no egress rules: egress stays open
    assert allows([only_ingress], to_db())
    with_egress = netpol("app", {}, egress=[{"to": [{"podSelector": {"matchLabels": {"app": "nope"}}}]}])
    assert not allows([with_egress], to_db())


def test_pod_selector_alone_means_the_policy_namespace() -> None:
    same_namespace = netpol("data", {}, [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}])
    assert not allows([same_namespace], to_db())  # web is in another namespace
    assert allows([same_namespace], Flow(Pod("web2", "data", {"app": "web"}), DB, "TCP", (5432, 5432), "x"))


def test_namespace_and_pod_selector_in_one_peer_is_and_in_two_peers_is_or() -> None:
    both = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "app"}},
            "podSelector": {"matchLabels": {"app": "api"}}}
    assert not allows([netpol("data", {}, [{"from": [both]}])], to_db())  # web is in app, but not app=api
    two = [{"namespaceSelector": both["namespaceSelector"]}, {"podSelector": both["podSelector"]}]
    assert allows([netpol("data", {}, [{"from": two}])], to_db())


def test_namespaces_match_by_their_labels() -> None:
    peer = {"namespaceSelector": {"matchLabels": {"team": "web"}}}
    policy = netpol("data", {}, [{"from": [peer]}])
    assert not allows([policy], to_db())
    assert allows([policy], to_db(), namespaces={"app": {"team": "web"}})


def test_match_expressions() -> None:
    not_web = {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}
    assert not allows([netpol("data", {}, [{"from": [{"namespaceSelector": {}, "podSelector": not_web}]}])], to_db())
    exists = {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
    assert allows([netpol("data", {}, [{"from": [{"namespaceSelector": {}, "podSelector": exists}]}])], to_db())


def test_ip_block_with_except() -> None:
    client = Address("a laptop", ("192.168.1.7/32",))
    policy = netpol("data", {}, [{"from": [{"ipBlock": {"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}}]}])
    assert not allows([policy], to_db(who=client))
    assert allows([policy], to_db(who=Address("another", ("192.168.2.7/32",))))


def test_ip_block_never_surely_admits_a_pod_but_may() -> None:
    policy = netpol("data", {}, [{"from": [{"ipBlock": {"cidr": VPC}}]}])
    assert not allows([policy], to_db(), certain=True)  # pods need a selector to be surely admitted
    assert allows([policy], to_db(), certain=False)  # but the VPC CNI gives pods VPC addresses
    excepted = netpol("data", {}, [{"from": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [VPC]}}]}])
    assert not allows([excepted], to_db(), certain=False)


def test_ports_numbers_names_ranges_and_protocol() -> None:
    web_peer = [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "web"}}}]

    def with_ports(*ports: dict[str, Any]) -> list[dict[str, Any]]:
        return [netpol("data", {}, [{"from": web_peer, "ports": list(ports)}])]

    assert allows(with_ports({"port": 5432}), to_db())
    assert not allows(with_ports({"port": 5432}), to_db(5433))
    assert not allows(with_ports({"port": 5432}), to_db(protocol="UDP"))  # protocol defaults to TCP
    assert allows(with_ports({"port": "sql"}), to_db())  # the receiving container's port named sql
    assert not allows(with_ports({"port": "http"}), to_db())  # web's port name, not db's
    assert allows(with_ports({"port": 5000, "endPort": 6000}), to_db())
    assert not allows(with_ports({"port": 5000, "endPort": 5431}), to_db())
    ranged = Flow(WEB, DB, "TCP", (1024, 65535), "ephemeral")
    assert not allows(with_ports({"port": 1024, "endPort": 40000}), ranged)
    assert allows(with_ports({"port": 1024, "endPort": 40000}, {"port": 40001, "endPort": 65535}), ranged)
    assert allows(with_ports({"port": 1024, "endPort": 40000}), ranged, certain=False)
    assert allows(with_ports({"protocol": "TCP"}), to_db())  # no port: every port of the protocol


def test_both_the_senders_egress_and_the_receivers_ingress_must_allow() -> None:
    ingress_ok = netpol("data", {}, [{"from": [{"namespaceSelector": {}}]}])
    egress_closed = netpol("app", {}, egress=[], types=["Egress"])
    assert allows([ingress_ok], to_db())
    assert not allows([ingress_ok, egress_closed], to_db())
    egress_ok = netpol("app", {}, egress=[{"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels":
                                                                                               {"app": "db"}}}]}])
    assert allows([ingress_ok, egress_closed, egress_ok], to_db())  # policies add up


def test_an_empty_rule_admits_every_peer_and_port() -> None:
    assert allows([DENY_DB, netpol("data", {}, [{}])], to_db())


@pytest.mark.parametrize("needed, policies, fires", [
    (True, [], False), (True, [DENY_DB], True), (False, [], True), (False, [DENY_DB], False)])
def test_findings(needed: bool, policies: list[dict[str, Any]], fires: bool) -> None:
    flow = Flow(WEB, DB, "TCP", (5432, 5432), "why", needed=needed)
    found = evaluate(Cluster(tuple(policies), {}, (VPC,)), flow)
    assert (found is not None) == fires
    if found:
        assert found.rule == "pod-network" and "web -> db (tcp 5432)" in found.resource
