"""What `plan` writes: plan.json that loads back, manifests, masked secrets."""

from __future__ import annotations

from pathlib import Path

from scripts.offline.plan import manifest_filename, write_plan
from scripts.offline.plan_model import SECRET, Plan, PlannedResource, sanitize
from tests.plan.fixtures import shipped_plan


def test_plan_json_round_trips(tmp_path: Path) -> None:
    plan = shipped_plan("prod")
    write_plan(plan, tmp_path)
    again = Plan.load(tmp_path)
    assert again == plan and Plan.load(tmp_path / "plan.json") == plan
    assert again.outputs["kubeconfig"] == SECRET


def test_secrets_are_masked_on_the_wire_format() -> None:
    wire = {"password": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                         "value": "hunter2"}, "port": 3306.0, "ratio": 0.5}
    assert sanitize("aws:rds/instance:Instance", wire) == {"password": SECRET, "port": 3306, "ratio": 0.5}


def test_kubernetes_secret_data_is_always_masked(tmp_path: Path) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "slurm-key", "namespace": "slurm"},
              "stringData": {"slurm.key": "plain-text-key"}, "data": {"jwt": "c2VjcmV0"}}
    clean = sanitize("kubernetes:core/v1:Secret", secret)
    assert clean["stringData"] == {"slurm.key": SECRET} and clean["data"] == {"jwt": SECRET}
    plan = Plan("t", "slurm-eks", [PlannedResource("urn:x", "kubernetes:core/v1:Secret", "k", None, None, [],
                                                   True, False, False, clean)])
    write_plan(plan, tmp_path)
    written = (tmp_path / "manifests" / manifest_filename(clean)).read_text()
    assert "plain-text-key" not in written and "c2VjcmV0" not in written
    assert manifest_filename(clean) == "secret_slurm_slurm-key.yaml"


def test_a_secret_whose_whole_data_is_secret_keeps_its_keys() -> None:
    sig = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}
    wire = {"kind": "Secret", "stringData": {**sig, "value": {"password": "hunter2", "user": "slurm"}}}
    assert sanitize("kubernetes:core/v1:Secret", wire)["stringData"] == {"password": SECRET, "user": SECRET}
