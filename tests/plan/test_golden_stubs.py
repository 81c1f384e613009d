"""tests/golden/ keeps a digest of each object copied from an upstream manifest, not its body
(tests/golden/upstream_stubs.py); `slurm-eks plan` keeps every body."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from components import upstream
from scripts.offline.plan import write_plan
from tests.golden.upstream_stubs import canonical_sha256, golden_plan, upstream_objects
from tests.plan.fixtures import shipped_plan

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
CRD = "customresourcedefinition_cluster_mpijobs.kubeflow.org.yaml"


def _release_objects() -> dict[tuple[str, str], dict]:
    return {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(upstream.read(upstream.MPI_OPERATOR))
            if o}


def test_the_goldens_hold_digests_of_upstream_objects_not_their_bodies() -> None:
    copied = upstream_objects()
    assert len(copied) == 9  # the release manifest's objects
    for path in sorted(GOLDEN.glob("*/manifests/*.yaml")):
        assert canonical_sha256(yaml.safe_load(path.read_text())) not in copied, path
    crd = _release_objects()[("CustomResourceDefinition", "mpijobs.kubeflow.org")]
    assert yaml.safe_load((GOLDEN / "prod" / "manifests" / CRD).read_text()) == {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "mpijobs.kubeflow.org"},
        "upstream": {"url": upstream.MPI_OPERATOR.url, "version": "v0.8.0", "sha256": canonical_sha256(crd)}}
    assert (GOLDEN / "prod" / "manifests" / CRD).stat().st_size < 500


def test_an_object_the_project_changes_is_kept_in_full() -> None:
    golden = golden_plan(shipped_plan("prod"))
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in golden.manifests()}
    # The Deployment runs on the system nodes as non-root and the Namespace carries Pod Security labels: not
    # upstream's bodies, so a golden diff shows them.
    assert by_name[("Deployment", "mpi-operator")]["spec"]["template"]["spec"]["nodeSelector"]
    assert by_name[("Namespace", "mpi-operator")]["metadata"]["labels"]
    assert "upstream" in by_name[("ClusterRole", "mpi-operator")]
    # A CRD edited by the project is no longer upstream's: its body is written, not a stale digest.
    plan = copy.deepcopy(shipped_plan("prod"))
    crd = next(r for r in plan.resources if r.inputs.get("kind") == "CustomResourceDefinition")
    crd.inputs["spec"]["names"]["shortNames"] = ["mj"]
    edited = next(d for d in golden_plan(plan).manifests() if d["kind"] == "CustomResourceDefinition")
    assert "upstream" not in edited and edited["spec"]["names"]["shortNames"] == ["mj"]


def test_the_digest_changes_with_the_body() -> None:
    crd = _release_objects()[("CustomResourceDefinition", "mpijobs.kubeflow.org")]
    changed = copy.deepcopy(crd)
    changed["spec"]["versions"][0]["served"] = False
    assert canonical_sha256(crd) != canonical_sha256(changed)
    assert canonical_sha256(crd) == canonical_sha256(copy.deepcopy(crd))


def test_the_user_facing_plan_keeps_every_body(tmp_path: Path) -> None:
    write_plan(shipped_plan("prod"), tmp_path)
    crd = yaml.safe_load((tmp_path / "manifests" / CRD).read_text())
    assert "upstream" not in crd and crd["spec"]["names"]["kind"] == "MPIJob"
