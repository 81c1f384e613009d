"""The in-cluster accounts reconcile as Pulumi registers it (under the offline plan's mocks): the desired
document a reviewer reads, the Job that applies it, and how a change of one QoS limit reads in `slurm-eks
diff`. The reconcile itself against a real slurmdbd: tests/slurm/test_accounts_slurm.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.config.cluster import ClusterConfig
from components.slinky import accounts
from components.slinky.accounts_document import desired_document, desired_json
from components.slinky.agent_image import AgentImage
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.diff import diff_plans, render_text
from scripts.offline.mocks import RealisticMocks
from scripts.offline.plan import record
from scripts.offline.plan_model import Plan
from slurm.agent.accounts import desired
from tests.slinky.helpers import config_of, variant

CLUSTER = "ML-Training-Prod"
IMAGE = AgentImage(f"123456789012.dkr.ecr.us-west-2.amazonaws.com/x/slurm-eks-agent@sha256:{'a' * 64}", "tag-1")
DATA = Path(__file__).resolve().parents[1] / "slurm" / "data" / "sacctmgr"


def planned(config: ClusterConfig) -> Plan:
    def program() -> None:
        parent = pulumi.ComponentResource("slurm-eks:index:SlurmCluster", "slurm")
        accounts.accounts_reconcile("slurm", parent, k8s.Provider("k8s"), config, CLUSTER, IMAGE, [])

    return record(program, "test", RealisticMocks(region=config.region, cluster_name=CLUSTER))


def manifests(plan: Plan) -> dict[str, dict[str, Any]]:
    return {doc["kind"] + "/" + doc["metadata"]["name"]: doc for doc in plan.manifests()}


def prod(change: Any = lambda raw: None) -> ClusterConfig:
    return config_of(variant("prod", change))


def test_a_config_map_and_a_job_named_after_what_they_hold(crd_registry: SchemaRegistry) -> None:
    config = prod()
    found = manifests(planned(config))
    document = accounts.desired_json(config, CLUSTER)
    job_name = accounts.job_name(document, IMAGE)
    # The document, no code: the code is the agent image's.
    assert set(found) == {"ConfigMap/slurm-eks-accounts", f"Job/{job_name}"}
    assert found["ConfigMap/slurm-eks-accounts"]["data"] == {"desired.json": document}
    job = found[f"Job/{job_name}"]
    assert all(doc["metadata"]["namespace"] == "slurm" for doc in found.values())
    assert [str(p) for doc in found.values() for p in validate_manifest(doc, crd_registry)] == []
    # `pulumi up` waits for it, and the next one runs it again if it failed.
    assert job["metadata"]["annotations"] == {"pulumi.com/replaceUnready": "true"}
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == accounts.BACKOFF_LIMIT
    (container,) = pod["containers"]
    assert container["image"] == IMAGE.reference and "command" not in container  # the image's entry point
    assert container["args"] == ["accounts", "--conf-server", "slurm-controller.slurm:6817",
                                 "--desired", "/etc/slurm-eks/accounts/desired.json"]
    # SlurmUser, never root; the key readable to its group alone (auth/slurm refuses o+r).
    assert pod["securityContext"]["runAsUser"] == 401 and pod["securityContext"]["fsGroup"] == 401
    assert pod["securityContext"]["runAsNonRoot"] is True
    key = next(v for v in pod["volumes"] if v["name"] == "slurm-key")["secret"]
    assert key["secretName"] == "slurm-auth-slurm" and key["defaultMode"] == 0o440
    # Another document or another agent image is another Job; the same ones are the same Job.
    assert accounts.job_name(document, IMAGE) == job_name
    assert accounts.job_name(document.replace("64", "32"), IMAGE) != job_name
    assert accounts.job_name(document, AgentImage(IMAGE.reference, "tag-2")) != job_name


def test_one_qos_limit_lowered_is_one_line_in_the_diff() -> None:
    def lower(raw: dict[str, Any]) -> None:
        raw["slurm"]["qos"]["vision"]["grpTRES"] = {"gres/gpu": 32}

    lines = render_text(diff_plans(planned(prod()), planned(prod(lower)))).splitlines()
    assert lines[0] == "0 to add, 2 to change, 0 to remove"
    assert lines[3:] == ["~ kubernetes:core/v1:ConfigMap slurm-accounts",
                         "    inputs.data.desired.json.qos.vision.GrpTRES: 'gres/gpu=64' -> 'gres/gpu=32'"]
    # The Job gets another name, so Pulumi replaces it and the reconcile runs again.
    assert lines[1] == "~ kubernetes:batch/v1:Job slurm-accounts-reconcile"
    assert lines[2].startswith("    inputs.metadata.name: 'slurm-eks-accounts-")


def test_the_document_is_sorted_and_every_user_defaults_to_their_first_account() -> None:
    def reorder(raw: dict[str, Any]) -> None:
        raw["slurm"]["accounts"] = dict(reversed(raw["slurm"]["accounts"].items()))
        raw["slurm"]["accounts"]["vision"]["users"] = ["carol", "alice"]

    text = desired_json(prod(reorder), CLUSTER)
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert document["cluster"] == "ml-training-prod"
    # Accounts reversed: vision comes first in the stack now, so alice defaults to it.
    assert document["users"]["alice"] == {"Accounts": ["llm", "vision"], "DefaultAccount": "vision"}
    assert document["qos"]["llm"] == {
        "Description": None, "GrpTRES": "gres/gpu=128", "MaxJobsPerUser": None, "MaxSubmitJobsPerUser": None,
        "MaxTRESPerJob": "", "MaxTRESPerUser": "gres/gpu=96", "MaxWall": "7-00:00:00", "Priority": 100}
    # The reconcile reads what the stack writes (they share no code, only this document).
    state = desired.state(desired_document(prod(), CLUSTER))
    assert state.qos["vision"].grp_tres == {"gres/gpu": 64} and state.qos["llm"].max_wall == 7 * 24 * 60
    assert state.accounts["llm"].qos == frozenset({"llm"}) and state.users["carol"].default_account == "vision"


def test_the_agent_entry_point_runs_the_reconcile(tmp_path: Path) -> None:
    """`python3 -m slurm.agent accounts --desired FILE`, the Job's args without --conf-server (no slurmctld here).
    sacctmgr is a stand-in printing what the real one printed on the local Slurm (tests/slurm/data/sacctmgr) and
    refusing any change: the document asks to remove what it lists, so the apply fails on its first change."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "sacctmgr"
    stand_in.write_text('#!/bin/sh\ncase "$*" in\n  *OnlyDefaults*) f=association_onlydefaults ;;\n'
                        '  *"show association"*) f=association ;;\n  *"show qos"*) f=qos ;;\n'
                        '  *"show account"*) f=account ;;\n  *"show cluster"*) f=cluster ;;\n'
                        '  *) echo "$*" >> "$0.log"; exit 1 ;;\nesac\n'
                        f'exec cat "{DATA}/show_$f.txt"\n')
    stand_in.chmod(0o755)
    (tmp_path / "d.json").write_text(json.dumps({"format": 1, "cluster": "local"}))
    done = subprocess.run([sys.executable, "-m", "slurm.agent", "accounts", "--desired", str(tmp_path / "d.json")],
                          cwd=Path(__file__).resolve().parents[2],
                          env={**os.environ, "PATH": f"{bin_dir}:{os.defpath}"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["- user sek-alice: account sek-a"]  # the first change, as it applies
    assert (bin_dir / "sacctmgr.log").read_text().split() == [
        "--immediate", "remove", "user", "where", "name=sek-alice", "account=sek-a", "cluster=local"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_document_loads(stack: str) -> None:
    config = config_of(variant(stack, lambda raw: None))
    state = desired.state(desired_document(config, config.name_for(stack)))
    assert set(state.accounts) == set(config.slurm.accounts) and set(state.qos) == set(config.slurm.qos)
