"""The deploy check learns from the twin: every connection a twin pod opened during the journeys (recorded by the
kernel, scripts/twin/policy.py) must be a flow the check's table (scripts/checks/pod_flows.py) says the
cluster needs, between the same endpoints, on that protocol and port; and nothing the plan's policies admit
was dropped between pods. Runs after the other journey modules of the same twin (the file name sorts last)."""

from __future__ import annotations

import ipaddress

import pytest

from components.config.validation import parse_cluster_config
from scripts.checks import pod_flows
from scripts.checks.pod_flows import Address, Endpoint, Flow, Pod
from scripts.twin.cluster import Twin, TwinPod
from scripts.twin.policy import Recorded
from tests.config.helpers import raw_config

pytestmark = [pytest.mark.twin]


def endpoint_of(pod: TwinPod, known: dict[str, Endpoint]) -> Pod | None:
    """The check's endpoint for a twin pod: same namespace, and the check's labels all on the pod (a Job's name
    labels only present: their value is the Job's name, which the check cannot know offline)."""
    for endpoint in known.values():
        if isinstance(endpoint, Pod) and endpoint.namespace == pod.namespace and all(
                k in pod.labels if k in pod_flows.JOB_CONTROLLER_LABELS else pod.labels.get(k) == v
                for k, v in endpoint.labels.items()):
            return endpoint
    return None


def covered(flows: list[Flow], who: Endpoint, whom: Endpoint | ipaddress.IPv4Address, protocol: str,
            port: int) -> bool:
    for flow in flows:
        if not flow.needed or flow.who != who or flow.protocol != protocol.upper():
            continue
        if not flow.ports[0] <= port <= flow.ports[1]:
            continue
        if isinstance(whom, ipaddress.IPv4Address):
            if isinstance(flow.whom, Address) and any(whom in ipaddress.ip_network(c) for c in flow.whom.cidrs):
                return True
        elif flow.whom == whom:
            return True
    return False


def unexplained(twin: Twin, stack: str, records: list[Recorded]) -> list[str]:
    config = parse_cluster_config(raw_config(stack), stack)[0]
    known = pod_flows.endpoints(config)
    vpc = (twin._vpc_cidr(),)
    table = list(pod_flows.flows(config, known, vpc, pod_flows.srun_ports(twin.plan)))
    pods = twin.all_pods()  # with the nodes scaled in since
    by_address = {str(twin.network.links[name].address): pod for name, pod in pods.items()}
    found = []
    for record in records:
        if record.direction != "egress_new" or record.peer.is_loopback:
            continue  # a pod's own loopback is never subject to policy
        source = pods[record.pod]
        who = endpoint_of(source, known)
        target = by_address.get(str(record.peer))
        whom: Endpoint | ipaddress.IPv4Address | None = (endpoint_of(target, known) if target else record.peer)
        what = f"{record.pod} -> {target.name if target else record.peer}:{record.port}/{record.protocol}"
        if who is None or whom is None:
            found.append(f"{what}: the deploy check has no endpoint for {record.pod if who is None else target}")
        elif target is not None and target.name == source.name:
            continue  # a pod to itself
        elif not covered(table, who, whom, record.protocol, record.port):
            found.append(f"{what}: not in the deploy check's flow table")
    return sorted(set(found))


def test_every_connection_the_journeys_made_is_in_the_deploy_checks_flow_table(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    records = twin.recorded()
    assert any(r.direction == "egress_new" for r in records), "the twin recorded no connection at all"
    missing = unexplained(twin, stack, records)
    assert not missing, f"{stack}: connections the deploy check does not know:\n" + "\n".join(missing)
    dropped = [f"{r.pod} <- {r.peer}:{r.port}/{r.protocol}" for r in records if r.direction == "ingress_dropped"]
    dropped += [f"{r.pod} -> {r.peer}:{r.port}/{r.protocol}" for r in records if r.direction == "egress_dropped"]
    assert not dropped, f"{stack}: connections the plan's NetworkPolicies dropped:\n" + "\n".join(sorted(dropped))
