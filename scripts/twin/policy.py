"""The plan's NetworkPolicies, enforced by the kernel in each twin pod's network namespace (nftables), and every
new connection recorded, so a flow the cluster would drop is dropped here and the flows pods really make can be
compared with the deploy check's flow table (scripts/checks/pod_flows.py).

Semantics of networking.k8s.io/v1 (kubernetes.io/docs/concepts/services-networking/network-policies/): a pod is
isolated for ingress (egress) when a policy of its namespace selects it with that policyType; then only what a
rule of such a policy admits gets in (out), by peer (podSelector in the policy's namespace, namespaceSelector,
both = AND, ipBlock with except) and port (number or range to endPort; TCP by default). Replies of an admitted
connection always pass (conntrack `established`), and so does the pod's own loopback. Selector matching and
policyTypes defaults are the deploy check's own functions: one reading of the API for both.

Each pod's ruleset is regenerated whole (`nft -f`) whenever pods come or go, except the recording sets, which
live on: `egress_new` (every connection the pod opened: destination, protocol, port) and `ingress_dropped`
(every connection its ingress rules refused: source, protocol, port), and `egress_dropped`.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.kubernetes.label_selectors import policy_types, selects
from scripts.twin.errors import TwinError

TABLE = "twin"
RECORD_SETS = ("egress_new", "egress_dropped", "ingress_dropped")
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}


@dataclass(frozen=True)
class PolicyPod:
    """What policies see of a pod: where it is, its labels, its address."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    address: ipaddress.IPv4Address


@dataclass(frozen=True)
class Recorded:
    """One recorded connection attempt: `peer` is the destination (egress) or the source (ingress)."""

    pod: str
    direction: str  # "egress_new", "egress_dropped" or "ingress_dropped"
    peer: ipaddress.IPv4Address
    protocol: str  # "tcp" / "udp"
    port: int


def _peers(rule_peers: Sequence[Mapping[str, Any]] | None, policy_namespace: str, pods: Iterable[PolicyPod],
           namespace_labels: Mapping[str, Mapping[str, str]]) -> list[str] | None:
    """Addresses (nft set elements) a rule's peers admit; None: every address (no `from`/`to`)."""
    if not rule_peers:
        return None
    elements: list[str] = []
    for peer in rule_peers:
        if "ipBlock" in peer:
            block = peer["ipBlock"]
            network = ipaddress.ip_network(block["cidr"])
            excepted = [ipaddress.ip_network(e) for e in block.get("except") or []]
            remaining = [network]
            for cut in excepted:
                remaining = [piece for part in remaining
                             for piece in (part.address_exclude(cut) if cut.subnet_of(part) else [part])
                             if not piece.subnet_of(cut)]
            elements += [str(net) for net in remaining if net.version == 4]
            continue
        pod_selector, ns_selector = peer.get("podSelector"), peer.get("namespaceSelector")
        for pod in pods:
            in_namespace = (selects(ns_selector, namespace_labels.get(pod.namespace, {}))
                            if ns_selector is not None else pod.namespace == policy_namespace)
            if in_namespace and selects(pod_selector, pod.labels):
                elements.append(str(pod.address))
    return elements


def _port_matches(ports: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """nft matches for a rule's ports: one per protocol; [""] means every port of every protocol."""
    if not ports:
        return [""]
    by_protocol: dict[str, list[str]] = {}
    for port in ports:
        protocol = PROTOCOLS[port.get("protocol", "TCP")]
        number = port.get("port")
        if number is None:
            by_protocol.setdefault(protocol, [])
            continue
        if not isinstance(number, int):
            raise TwinError(f"NetworkPolicy port {number!r}: named ports are not supported by the twin")
        end = port.get("endPort")
        by_protocol.setdefault(protocol, []).append(f"{number}-{end}" if end else str(number))
    return [f"meta l4proto {proto}" + (f" th dport {{ {', '.join(values)} }}" if values else "")
            for proto, values in by_protocol.items()]


def _rule_lines(direction: str, rules: Sequence[Mapping[str, Any]], policy_namespace: str,
                pods: Sequence[PolicyPod], namespace_labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    key, field = ("from", "saddr") if direction == "ingress" else ("to", "daddr")
    lines = []
    for rule in rules:
        peers = _peers(rule.get(key), policy_namespace, pods, namespace_labels)
        if peers == []:
            continue  # selects nothing (yet)
        address = f"ip {field} {{ {', '.join(peers)} }} " if peers is not None else ""
        for port in _port_matches(rule.get("ports")):
            lines.append(f"{address}{port} accept".strip())
    return lines


def ruleset(pod: PolicyPod, policies: Sequence[Mapping[str, Any]], pods: Sequence[PolicyPod],
            namespace_labels: Mapping[str, Mapping[str, str]]) -> str:
    """The nft script for `pod`: the policies of its namespace that select it, in its network namespace."""
    mine = [p for p in policies
            if p["metadata"].get("namespace", "default") == pod.namespace
            and selects(p["spec"].get("podSelector"), pod.labels)]
    script = [f"table inet {TABLE} {{"]
    for name in RECORD_SETS:
        script.append(f"  set {name} {{ type ipv4_addr . inet_proto . inet_service; flags dynamic; size 65535; }}")
    script += ["  chain input { type filter hook input priority 0; policy accept; }",
               "  chain output { type filter hook output priority 0; policy accept; }", "}",
               f"flush chain inet {TABLE} input", f"flush chain inet {TABLE} output"]
    record_new = ("add @egress_new { ip daddr . meta l4proto . th dport }")
    script.append(f"add rule inet {TABLE} output ct state new meta l4proto {{ tcp, udp }} {record_new}")
    for direction, chain, loop in (("ingress", "input", "iif lo"), ("egress", "output", "oif lo")):
        isolating = [p for p in mine if direction.capitalize() in policy_types(p["spec"])]
        if not isolating:
            continue
        script.append(f"add rule inet {TABLE} {chain} {loop} accept")
        script.append(f"add rule inet {TABLE} {chain} ct state established,related accept")
        for policy in isolating:
            namespace = policy["metadata"].get("namespace", "default")
            for line in _rule_lines(direction, policy["spec"].get(direction) or [], namespace, pods,
                                    namespace_labels):
                script.append(f"add rule inet {TABLE} {chain} {line}")
        peer = "saddr" if direction == "ingress" else "daddr"
        record = f"{direction}_dropped"
        script.append(f"add rule inet {TABLE} {chain} meta l4proto {{ tcp, udp }} "
                      f"add @{record} {{ ip {peer} . meta l4proto . th dport }}")
        script.append(f"add rule inet {TABLE} {chain} drop")
    return "\n".join(script) + "\n"


def apply(netns: str, script: str) -> None:
    result = subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=script, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise TwinError(f"nftables refused the ruleset for {netns}: {result.stderr.strip()}\n{script}")


def recorded(pod: str, netns: str) -> list[Recorded]:
    """The connections recorded in the pod's namespace so far."""
    out: list[Recorded] = []
    for name in RECORD_SETS:
        result = subprocess.run(["ip", "netns", "exec", netns, "nft", "-j", "list", "set", "inet", TABLE, name],
                                capture_output=True, text=True)
        if result.returncode != 0:
            continue
        for item in json.loads(result.stdout)["nftables"]:
            for element in (item.get("set") or {}).get("elem", []):
                value = element.get("elem", {}).get("val", element) if isinstance(element, dict) else element
                address, protocol, port = value["concat"]
                out.append(Recorded(pod, name, ipaddress.ip_address(address), str(protocol), int(port)))
    return out
