"""Who can reach what: the login NLB, the accounting database, and the keys that never leave Secrets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from components.slinky.specs import NLB_INTERNAL, login_service
from scripts.offline.plan import write_plan
from scripts.offline.plan_model import SECRET
from tests.plan.fixtures import one, shipped_plan
from tests.slinky.helpers import config_of, objects, releases, resource, variant

WORLD = {"0.0.0.0/0", "::/0"}


def _login(raw_change: Any) -> dict[str, Any]:
    return login_service(config_of(variant("prod", raw_change)), "10.0.0.0/16")


def test_shipped_login_is_open_only_to_the_listed_ranges() -> None:
    for stack in ("dev", "prod"):
        (login,) = objects(shipped_plan(stack), "LoginSet").values()
        service = login["spec"]["service"]
        assert service["port"] == 22 and service["spec"]["type"] == "LoadBalancer"
        ranges = service["spec"]["loadBalancerSourceRanges"]
        assert ranges == list(config_of(variant(stack, lambda _: None)).slurm.login.allowed_cidrs)
        assert not WORLD & set(ranges)


def test_no_listed_range_means_an_internal_nlb_for_the_vpc() -> None:
    service = _login(lambda raw: raw["slurm"]["login"].update(allowedCidrs=[]))
    assert service["metadata"]["annotations"][NLB_INTERNAL] == "true"
    assert service["spec"]["loadBalancerSourceRanges"] == ["10.0.0.0/16"]


def test_the_internet_is_the_policy_packs_to_allow() -> None:
    """0.0.0.0/0 in allowedCidrs makes an internet-facing NLB; the policy pack's no-world-ssh refuses it unless the
    pack's owners waive it for the stack (tests/policy/test_waivers.py): the stack file cannot allow it alone."""
    service = _login(lambda raw: raw["slurm"]["login"].update(allowedCidrs=["0.0.0.0/0"]))
    assert service["spec"]["loadBalancerSourceRanges"] == ["0.0.0.0/0"]
    assert NLB_INTERNAL not in service["metadata"]["annotations"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_secret_value_reaches_the_plan(stack: str, tmp_path: Path) -> None:
    plan = shipped_plan(stack)
    write_plan(plan, tmp_path)
    text = (tmp_path / "plan.json").read_text() + "".join(
        p.read_text() for p in (tmp_path / "manifests").iterdir())
    # The mocks answer every random resource with "planned-<digest>"; none may show up anywhere.
    assert plan.of_type("random:index/randomPassword:RandomPassword")
    assert re.findall(r"planned-[0-9a-f]+", text) == []
    secrets = objects(plan, "Secret")
    for name in ("slurm-auth-slurm", "slurm-auth-jwt", "slurm-db-password"):
        assert set(secrets[name]["stringData"].values()) == {SECRET}


def test_controller_and_accounting_authenticate_with_the_generated_keys() -> None:
    plan = shipped_plan("prod")
    secrets = objects(plan, "Secret")
    for kind in ("Controller", "Accounting"):
        (doc,) = objects(plan, kind).values()
        for ref in ("slurmKeyRef", "jwtKeyRef"):
            assert doc["spec"][ref]["name"] in secrets


def test_rds_is_private_encrypted_and_kept() -> None:
    plan = shipped_plan("prod")
    db = one(plan, "aws:rds/instance:Instance")
    i = db.inputs
    assert (i["engine"], i["storageEncrypted"], i["publiclyAccessible"]) == ("mariadb", True, False)
    assert (i["deletionProtection"], i["skipFinalSnapshot"]) == (True, False) and i["finalSnapshotIdentifier"]
    assert db.protect and db.retain_on_delete
    # RDS keeps the master password in Secrets Manager: none in the program or its state.
    assert i["manageMasterUserPassword"] is True and "password" not in i
    subnets = one(plan, "aws:rds/subnetGroup:SubnetGroup").inputs
    private = [r for r in plan.of_type("aws:ec2/subnet:Subnet") if "private" in r.name]
    assert i["dbSubnetGroupName"] == subnets["name"] and len(subnets["subnetIds"]) == len(private)
    (group,) = i["vpcSecurityGroupIds"]
    ingress = [r.inputs for r in plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
               if r.inputs["securityGroupId"] == group]
    # The group the system nodes (where slurmdbd runs) carry: the one EKS creates.
    (cluster_sg,) = plan.nodes["managed-node-group/eks-system"]
    assert ingress == [{"description": "MariaDB from the EKS cluster security group", "fromPort": 3306,
                        "ipProtocol": "tcp", "referencedSecurityGroupId": cluster_sg, "securityGroupId": group,
                        "toPort": 3306}]
    (accounting,) = objects(plan, "Accounting").values()
    storage = accounting["spec"]["storageConfig"]
    assert storage["host"].endswith(".rds.amazonaws.com") and storage["port"] == 3306
    assert storage["passwordKeyRef"]["name"] in objects(plan, "Secret")
    assert not objects(plan, "MariaDB")


def test_dev_runs_mariadb_in_the_cluster() -> None:
    plan = shipped_plan("dev")
    assert not plan.of_type("aws:rds/instance:Instance")
    (mariadb,) = objects(plan, "MariaDB").values()
    (accounting,) = objects(plan, "Accounting").values()
    storage = accounting["spec"]["storageConfig"]
    assert storage["host"] == f"{mariadb['metadata']['name']}.slurm.svc.cluster.local"
    assert mariadb["spec"]["passwordSecretKeyRef"] == storage["passwordKeyRef"]
    assert (mariadb["spec"]["username"], mariadb["spec"]["database"]) == (storage["username"], storage["database"])
    operator = releases(plan)["mariadb-operator"]
    assert operator.urn in resource(plan, "MariaDB", mariadb["metadata"]["name"]).dependencies


def test_operator_starts_after_cert_manager_and_before_any_slurm_object() -> None:
    plan = shipped_plan("prod")
    charts = releases(plan)
    cert_manager, crds, operator = charts["cert-manager"], charts["slurm-operator-crds"], charts["slurm-operator"]
    assert cert_manager.inputs["values"]["crds"] == {"enabled": True}
    assert {cert_manager.urn, crds.urn} <= set(operator.dependencies)
    assert operator.inputs["version"] == crds.inputs["version"] == "1.2.1"
    assert operator.inputs["chart"] == "oci://ghcr.io/slinkyproject/charts/slurm-operator"
    assert all(not r.inputs.get("skipAwait") for r in (cert_manager, operator))
    for kind in ("Controller", "Accounting", "RestApi", "LoginSet", "NodeSet"):
        for name in objects(plan, kind):
            assert operator.urn in resource(plan, kind, name).dependencies, f"{kind}/{name}"
    system = {"node.slurm-eks.io/role": "system"}
    assert cert_manager.inputs["values"]["nodeSelector"] == system
    terms = operator.inputs["values"]["operator"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "node.slurm-eks.io/role", "operator": "In", "values": ["system"]}]}]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_login_users_read_the_partitions_file_but_cannot_change_it(stack: str) -> None:
    (login,) = objects(shipped_plan(stack), "LoginSet").values()
    mounts = {m["name"]: m for m in login["spec"]["login"]["volumeMounts"]}
    assert mounts["partitions"] == {"name": "partitions", "mountPath": "/etc/slurm-eks/partitions.json",
                                    "subPath": "partitions.json", "readOnly": True}
    volumes = {v["name"]: v for v in login["spec"]["template"]["spec"]["volumes"]}
    assert volumes["partitions"] == {"name": "partitions", "configMap": {"name": "slurm-eks-partitions"}}
