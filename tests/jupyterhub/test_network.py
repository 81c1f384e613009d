"""The JupyterHub flows of the pod-network rule against the policies the program makes (no plan: the policy
documents themselves), and the rule firing when the notebooks' one way into Slurm, or a wall, is lost."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from components.segmentation.network_policies import policy_documents
from components.slinky.slurm_conf import SRUN_PORT_RANGE
from scripts.checks.pod_flows import Cluster, endpoints, evaluate, flows
from tests.config.helpers import raw_config

VPC = "10.0.0.0/16"


@pytest.fixture(scope="module")
def prod() -> ClusterConfig:
    return parse_cluster_config(raw_config("prod"), "prod")[0]


def findings(config: ClusterConfig, policies: list[dict[str, Any]]) -> list[str]:
    cluster = Cluster(tuple(policies), {}, (VPC,))
    # srun listens on the range our slurm.conf sets (SrunPortRange), as `slurm-eks check` reads it from the plan.
    return [f.resource for flow in flows(config, endpoints(config), (VPC,), SRUN_PORT_RANGE)
            if (f := evaluate(cluster, flow))]


def test_prod_policies_admit_the_hub_flows_and_nothing_forbidden(prod: ClusterConfig) -> None:
    docs = policy_documents(prod, VPC)
    assert any(d["metadata"]["namespace"] == "jupyterhub" for d in docs)
    assert findings(prod, docs) == []


def test_losing_notebook_to_slurmrestd_is_reported(prod: ClusterConfig) -> None:
    docs = copy.deepcopy(policy_documents(prod, VPC))
    rest = next(d for d in docs if d["metadata"] == {"name": "slurmrestd", "namespace": "slurm"})
    rest["spec"]["ingress"][0]["from"] = rest["spec"]["ingress"][0]["from"][:1]  # the operator only, as before
    assert findings(prod, docs) == ["a notebook server -> slurmrestd (tcp 6820)"]


def test_a_notebook_egress_to_every_namespace_is_reported(prod: ClusterConfig) -> None:
    docs = copy.deepcopy(policy_documents(prod, VPC))
    notebooks = next(d for d in docs if d["metadata"] == {"name": "notebooks", "namespace": "jupyterhub"})
    notebooks["spec"]["egress"].append({"to": [{"namespaceSelector": {}}]})
    # login admits the VPC on 22 (SSH through the NLB): only the notebooks' egress keeps them off it
    assert findings(prod, docs) == ["a notebook server -> a login pod (tcp 22)"]
