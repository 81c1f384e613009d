"""The tracking server's NetworkPolicies against the deploy check's flow table (no plan: the policy documents
themselves): it admits exactly Slurm's jobs (slurmd), login pods and, with JupyterHub, notebooks, on its one port,
and reaches S3 and its database only; the pod-network rule fires when a client loses its way in or a wall opens."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config.cluster import ClusterConfig
from components.names import MLFLOW_NAMESPACE, MLFLOW_PORT
from components.segmentation.network_policies import policy_documents
from components.slinky.slurm_conf import SRUN_PORT_RANGE
from scripts.checks.pod_flows import Cluster, Endpoint, Flow, Pod, endpoints, evaluate, flows
from tests.config.helpers import raw_config
from tests.slinky.helpers import config_of, variant

VPC = "10.0.0.0/16"


@pytest.fixture(scope="module")
def prod() -> ClusterConfig:
    return config_of(raw_config("prod"))


def without_hub(raw: dict[str, Any]) -> None:
    raw["addons"].pop("jupyterhub")


def in_cluster_dev(raw: dict[str, Any]) -> None:
    raw["addons"] = {"mlflow": {"artifacts": "s3://dev-ml-artifacts/mlflow", "database": "in-cluster"}}


def findings(config: ClusterConfig, policies: list[dict[str, Any]]) -> list[str]:
    cluster = Cluster(tuple(policies), {}, (VPC,))
    return [f.resource for flow in flows(config, endpoints(config), (VPC,), SRUN_PORT_RANGE)
            if (f := evaluate(cluster, flow))]


def admitted(config: ClusterConfig, policies: list[dict[str, Any]]) -> set[str]:
    """Every pod of the flow table whose connection to the server's port its ingress takes."""
    e = endpoints(config)
    server = e["mlflow"]
    cluster = Cluster(tuple(policies), {}, (VPC,))
    return {key for key, pod in e.items() if isinstance(pod, Pod) and pod is not server and cluster.side_allows(
        server, pod, "Ingress", Flow(pod, server, "TCP", (MLFLOW_PORT, MLFLOW_PORT), "log"), certain=False)}


def policy_named(docs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(d for d in docs if d["metadata"] == {"name": name, "namespace": MLFLOW_NAMESPACE})


@pytest.mark.parametrize("change", [None, without_hub], ids=["prod", "prod-without-jupyterhub"])
def test_the_server_admits_exactly_jobs_logins_and_notebooks(change: Any) -> None:
    config = config_of(variant("prod", change or (lambda raw: None)))
    slurmd = {f"slurmd {p}" for p in config.partitions}
    notebooks = {"notebook"} if config.addons.jupyterhub else set()
    assert admitted(config, policy_documents(config, VPC)) == slurmd | {"login"} | notebooks
    assert findings(config, policy_documents(config, VPC)) == []


def test_in_cluster_sqlite_needs_no_database_flow() -> None:
    config = config_of(variant("dev", in_cluster_dev))
    docs = policy_documents(config, VPC)
    egress = policy_named(docs, "server")["spec"]["egress"]
    assert [r["ports"] for r in egress] == [[{"protocol": "TCP", "port": 443}]]  # S3 and STS only
    assert not any(d["metadata"]["name"] == "database-user" for d in docs if d["metadata"]["namespace"] == "mlflow")
    assert admitted(config, docs) == {f"slurmd {p}" for p in config.partitions} | {"login"}
    assert findings(config, docs) == []


def test_the_namespace_denies_by_default_and_never_reaches_the_api_or_imds(prod: ClusterConfig) -> None:
    docs = [d for d in policy_documents(prod, VPC) if d["metadata"]["namespace"] == MLFLOW_NAMESPACE]
    names = {d["metadata"]["name"] for d in docs}
    assert names == {"default-deny", "allow-dns", "server", "database-user"}
    assert "allow-kubernetes-api" not in names
    for doc in docs:
        for rule in doc["spec"].get("egress", []):
            for peer in rule.get("to", []):
                block = peer.get("ipBlock")
                if block and block["cidr"] == "0.0.0.0/0":
                    assert "169.254.0.0/16" in block["except"] and VPC in block["except"]


def test_a_login_pod_losing_its_way_in_is_reported(prod: ClusterConfig) -> None:
    docs = copy.deepcopy(policy_documents(prod, VPC))
    ingress = policy_named(docs, "server")["spec"]["ingress"][0]
    ingress["from"] = [p for p in ingress["from"] if p["podSelector"]["matchLabels"].get(
        "app.kubernetes.io/name") != "login"]
    assert findings(prod, docs) == [f"a login pod -> the MLflow tracking server (tcp {MLFLOW_PORT})"]


def test_a_slurmd_egress_without_mlflow_is_reported(prod: ClusterConfig) -> None:
    docs = copy.deepcopy(policy_documents(prod, VPC))
    slurmd = next(d for d in docs if d["metadata"] == {"name": "slurmd", "namespace": "slurm"})
    slurmd["spec"]["egress"] = [r for r in slurmd["spec"]["egress"]
                                if r.get("ports") != [{"protocol": "TCP", "port": MLFLOW_PORT}]]
    assert findings(prod, docs) == [f"slurmd of {p} -> the MLflow tracking server (tcp {MLFLOW_PORT})"
                                    for p in prod.partitions]


def test_opening_the_server_to_every_pod_is_reported(prod: ClusterConfig) -> None:
    docs = copy.deepcopy(policy_documents(prod, VPC))
    policy_named(docs, "server")["spec"]["ingress"].append({"from": [{"namespaceSelector": {}}]})
    # Every other pod of ours keeps its own egress narrow: the pods with none (kube-system's) get through.
    assert findings(prod, docs) == [f"CoreDNS -> the MLflow tracking server (tcp {MLFLOW_PORT})"]


def test_a_server_egress_to_the_vpc_is_reported(prod: ClusterConfig) -> None:
    docs = copy.deepcopy(policy_documents(prod, VPC))
    policy_named(docs, "server")["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": VPC}}]})
    # Slurm's daemons admit their own clients only; the API's address and SSH through the NLB (the VPC) remain.
    assert findings(prod, docs) == ["the MLflow tracking server -> the EKS control plane (tcp 443)",
                                    "the MLflow tracking server -> a login pod (tcp 22)"]


def test_the_flow_table_lists_the_server_and_its_job(prod: ClusterConfig) -> None:
    e: dict[str, Endpoint] = endpoints(prod)
    assert isinstance(e["mlflow"], Pod) and e["mlflow"].ports == {"http": MLFLOW_PORT}
    assert "mlflow db-user job" in e
    assert "mlflow" not in endpoints(config_of(raw_config("dev")))
