"""GitOps mode: `slurm-eks gitops export` of prod (valid Argo CD Applications, matching the plan, unresolved
values listed), the `gitops` config rules, and a gitops stack's plan (Argo CD and the root Application instead
of the charts). One plan of each stack per module."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from components.config.gitops import GitOps
from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, stack_file
from components.config.validation import parse_cluster_config
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.gitops_export import RELEASE, Export, build_export, differences, write_export
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan, known
from tests.conftest import require_shared
from tests.plan.fixtures import shipped_plan

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

REPO_URL = "https://git.example.com/platform/slurm-eks-gitops.git"
GITOPS = GitOps.model_validate({"repoURL": REPO_URL, "path": "clusters/prod"})


@pytest.fixture(scope="module")
def prod_plan() -> Plan:
    return shipped_plan("prod")  # the session's plan of prod, shared with other modules on this worker


@pytest.fixture(scope="module")
def tree(prod_plan: Plan, tmp_path_factory: pytest.TempPathFactory) -> tuple[Export, Path]:
    ex = build_export(prod_plan, GITOPS)
    out = tmp_path_factory.mktemp("export")
    write_export(ex, out, "readme\n")
    return ex, out


def test_every_document_validates_against_argo_cd_and_core_schemas(tree: tuple[Export, Path]) -> None:
    registry = SchemaRegistry.from_crd_dirs([require_shared("crds")])
    ex, _ = tree
    apps = [d for d in ex.files.values() if d["kind"] == "Application"]
    assert apps and all(d["spec"]["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True} for d in apps)
    problems = [p for d in ex.files.values() for p in validate_manifest(known(d), registry)]
    assert problems == []


def test_a_broken_application_fails_the_schema() -> None:
    registry = SchemaRegistry.from_crd_dirs([require_shared("crds/argocd")])
    ex = build_export(Plan.from_json(Path("tests/golden/dev/plan.json").read_text()), GITOPS)
    doc = copy.deepcopy(next(d for d in ex.files.values() if d["kind"] == "Application"))
    doc["spec"]["syncPolicy"]["automated"]["prune"] = "yes"
    assert validate_manifest(doc, registry)


def test_the_export_matches_the_plan(prod_plan: Plan, tree: tuple[Export, Path]) -> None:
    assert differences(prod_plan, tree[1]) == []
    assert {d["spec"]["source"]["helm"]["releaseName"] for d in tree[0].files.values()
            if "helm" in d.get("spec", {}).get("source", {})} == {r.inputs["name"] for r in prod_plan.of_type(RELEASE)}


@pytest.mark.parametrize("tamper", ["version", "values", "extra manifest", "missing app"])
def test_a_tampered_export_is_caught(prod_plan: Plan, tree: tuple[Export, Path], tmp_path: Path, tamper: str) -> None:
    out = tmp_path / "t"
    shutil.copytree(tree[1], out)
    app = out / "apps" / "keda.yaml"
    doc = yaml.safe_load(app.read_text())
    if tamper == "version":
        doc["spec"]["source"]["targetRevision"] = "0.0.1"
    elif tamper == "values":
        doc["spec"]["source"]["helm"]["valuesObject"]["injected"] = True
    if tamper == "missing app":
        app.unlink()
    else:
        app.write_text(yaml.safe_dump(doc))
    if tamper == "extra manifest":
        (out / "manifests" / "wave-0" / "configmap_default_extra.yaml").write_text("kind: ConfigMap\n")
    assert differences(prod_plan, out)


def test_deploy_time_values_are_listed_never_written(tree: tuple[Export, Path]) -> None:
    ex, out = tree
    text = "".join(p.read_text() for p in (out / "apps").glob("*.yaml")) + "".join(
        p.read_text() for p in (out / "manifests").rglob("*.yaml"))
    assert "123456789012" not in text and "[secret]" not in text and "[unknown]" not in text
    karpenter = ("apps/karpenter.yaml: spec.source.helm.valuesObject.serviceAccount.annotations."
                 "eks.amazonaws.com/role-arn")
    assert karpenter in ex.unresolved and karpenter in (out / "UNRESOLVED.md").read_text()
    assert not any("secret_" in f for f in ex.files)  # Secrets stay with Pulumi


def test_values_from_resolve_a_listed_path(prod_plan: Plan, tree: tuple[Export, Path]) -> None:
    key = next(iter(tree[0].unresolved))
    again = build_export(prod_plan, GITOPS, {key: "arn:aws:iam::111122223333:role/real"})
    assert key not in again.unresolved and len(again.unresolved) == len(tree[0].unresolved) - 1


def test_export_refuses_unresolved_without_the_flag(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from scripts.cli.main import app

    refused = CliRunner().invoke(app, ["gitops", "export", "--stack", "dev", str(tmp_path / "a"),
                                       "--repo-url", REPO_URL])
    allowed = CliRunner().invoke(app, ["gitops", "export", "--stack", "dev", str(tmp_path / "b"),
                                       "--repo-url", REPO_URL, "--allow-unresolved"])
    assert (refused.exit_code, allowed.exit_code) == (1, 0), refused.output
    assert "UNRESOLVED(" in "".join(p.read_text() for p in (tmp_path / "b").rglob("*.yaml"))


def _raw(stack: str) -> dict:
    return yaml.safe_load(stack_file(stack, STACKS_DIR).read_text())


@pytest.mark.parametrize(("field", "value"), [("repoURL", "http://git.example.com/x.git"),
                                               ("repoURL", "/srv/git/repo"), ("path", "../other"),
                                               ("targetRevision", "my branch")])
def test_bad_gitops_settings_are_refused(field: str, value: str) -> None:
    cluster = _raw("prod")["config"]["slurm-eks:cluster"]
    cluster["gitops"] = {"repoURL": REPO_URL, field: value}
    with pytest.raises(ConfigError, match=f"gitops.{field}"):
        parse_cluster_config(cluster, "test")


def test_a_gitops_stack_installs_argo_cd_and_the_root_instead_of_the_charts(tmp_path: Path) -> None:
    raw = _raw("prod")
    raw["config"]["slurm-eks:cluster"]["gitops"] = {"repoURL": "git@git.example.com:platform/gitops.git",
                                                    "targetRevision": "main", "path": "clusters/prod"}
    stack_file("prod", tmp_path).write_text(yaml.safe_dump(raw))
    plan, _ = run_plan("prod", tmp_path)
    assert [r.inputs["chart"] for r in plan.of_type(RELEASE)] == ["argo-cd"]
    (root,) = [r.inputs for r in plan.resources if r.inputs.get("kind") == "Application"]
    assert root["spec"]["source"] == {"repoURL": "git@git.example.com:platform/gitops.git", "targetRevision": "main",
                                      "path": "clusters/prod/apps", "directory": {"exclude": "manifests-*"}}
    argocd_ns = [r for r in plan.of_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == "argocd"]
    assert argocd_ns and argocd_ns[0].inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    from components.config.validation import parse_cluster_config as parse
    from scripts.checks import pod_flows

    config, _ = parse(raw["config"]["slurm-eks:cluster"], "test")
    assert [f for f in pod_flows.check(plan, config) if f.severity == "error"] == []
