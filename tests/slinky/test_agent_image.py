"""The agent image in the plan (components/slinky/agent_image.py): built by `pulumi up` from this checkout on the
stack's Slinky sackd image into an immutable ECR repository, the pods run by the build's digest (unknown offline,
never made up); with `slurm.images.agent` nothing is built and the pods run that image."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from components.config.stackfile import load_stack
from components.slinky import agent_image
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import UNKNOWN
from tests.config.helpers import raw_config
from tests.plan.fixtures import one, shipped_plan

OWN = f"registry.example.com/ml/slurm-eks-agent@sha256:{'b' * 64}"


def agent_images(plan: object) -> set[str]:
    pods = [r.inputs["spec"]["template"]["spec"] for r in plan.resources  # type: ignore[attr-defined]
            if r.type in ("kubernetes:apps/v1:Deployment", "kubernetes:batch/v1:Job")
            and "slurm-eks-agent" in str((r.inputs["spec"]["template"].get("metadata") or {}).get("labels"))]
    assert len(pods) == 2  # the lifecycle agent's Deployment and the accounts Job
    return {c["image"] for pod in pods for c in [*pod.get("initContainers", []), *pod["containers"]]}


def test_pulumi_up_builds_it_on_the_stacks_sackd_image_and_the_pods_run_its_digest() -> None:
    plan = shipped_plan("prod")
    repository = one(plan, "aws:ecr/repository:Repository").inputs
    assert repository["name"] == "ml-training-prod/slurm-eks-agent"
    assert repository["imageTagMutability"] == "IMMUTABLE"
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True}
    image = one(plan, "docker-build:index:Image").inputs
    base = "ghcr.io/slinkyproject/sackd:25.11.8-ubuntu24.04"  # the stack's Slurm release, Slinky's sackd stage
    assert image["buildArgs"] == {"SACKD_IMAGE": base} and agent_image.base_image(load_stack("prod")[0]) == base
    # Relative to the project directory (the program's working directory): the plan names no checkout's path.
    assert (image["context"]["location"], image["dockerfile"]["location"]) == ("slurm", "slurm/agent/Dockerfile")
    assert agent_image.PROJECT_ROOT / image["context"]["location"] == agent_image.CONTEXT
    assert image["platforms"] == ["linux/amd64"] and image["push"] is True and image["buildOnPreview"] is False
    assert image["tags"] == [f"123456789012.dkr.ecr.us-west-2.amazonaws.com/ml-training-prod/slurm-eks-agent:"
                             f"{agent_image.context_digest(base)}"]
    assert agent_images(plan) == {UNKNOWN}  # the digest only the build knows


def test_a_stack_with_its_own_agent_image_builds_nothing(tmp_path: Path) -> None:
    raw = raw_config("dev")
    raw["slurm"].setdefault("images", {})["agent"] = OWN
    (tmp_path / "Pulumi.own.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    asyncio.run(asyncio.sleep(0))  # as a test or command before it in the process may: it leaves no event loop set
    plan, _ = run_plan("own", tmp_path)
    assert not [r for r in plan.resources if r.type.startswith(("aws:ecr/", "docker-build:"))]
    assert agent_images(plan) == {OWN}


def test_the_tag_follows_what_goes_into_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    context = tmp_path / "slurm"
    shutil.copytree(agent_image.CONTEXT / "agent", context / "agent",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(agent_image.CONTEXT / "__init__.py", context / "__init__.py")
    monkeypatch.setattr(agent_image, "CONTEXT", context)
    before = agent_image.context_digest("base:1")
    assert agent_image.context_digest("base:1") == before  # the same inputs, the same tag
    assert agent_image.context_digest("base:2") != before  # another Slurm release
    (context / "agent" / "__pycache__").mkdir()
    (context / "agent" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert agent_image.context_digest("base:1") == before  # what the build never copies
    (context / "agent" / "sackd.py").write_text((context / "agent" / "sackd.py").read_text() + "#\n")
    assert agent_image.context_digest("base:1") != before  # another agent
