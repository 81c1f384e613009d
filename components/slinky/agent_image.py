"""The slurm-eks agent image (slurm/agent/Dockerfile): what the lifecycle Deployment and the accounts Job run.

How the pods get its digest: `pulumi up` builds the image from this checkout into an ECR repository the stack
creates (pulumi-docker-build's `Image`, BuildKit through buildx), and the pods take the build's `ref` output,
`<repository>:<tag>@sha256:<digest>`. Chosen over a release workflow publishing to GHCR because the image then
always holds the agent code of the commit being deployed (a stack can never run agents of another release
against its settings documents), it needs no registry of ours to trust or reach, and it builds on the stack's own
Slurm image: the base is the stack's Slinky `sackd` image (SACKD_IMAGE), so the agents' Slurm clients are the
cluster's release. The offline plan cannot know a digest, so it shows the image as unknown; nothing makes one up.

`slurm.images.agent` points the pods at an image of your own registry instead (by digest; the config rules refuse
a tag): then nothing is built and `pulumi up` needs no Docker.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from components.config.cluster import ClusterConfig
from components.config.slinky_releases import SERIES, SLINKY_REGISTRY, patch_release, release_series

# The build context is slurm/ (the Dockerfile copies slurm/__init__.py and slurm/agent/ from it). The build is
# handed paths relative to the project directory, which is the program's working directory under `pulumi up`
# (the language host runs the program there), so the plan and the state do not name the checkout's location.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONTEXT = PROJECT_ROOT / "slurm"
DOCKERFILE = CONTEXT / "agent" / "Dockerfile"
REPOSITORY = "slurm-eks-agent"
# The system nodes the agents run on (components/config/cluster.py SystemNodes: m7i, x86_64).
PLATFORM = "linux/amd64"
# ECR keeps this many agent images; older ones (no pod runs them after an update) expire.
KEEP_IMAGES = 10


@dataclass(frozen=True)
class AgentImage:
    reference: pulumi.Input[str]  # what the pods run: by digest (unknown until `pulumi up` has built it)
    identity: str  # known offline, and changes whenever the image would: names the Jobs and rolls the pods


def base_image(config: ClusterConfig) -> str:
    """Slinky's sackd image of the stack's Slurm release (SlinkyProject/containers' `sackd` stage, published as
    ghcr.io/slinkyproject/sackd:<release>-<os>): the Slurm clients and sackd, nothing of the login node's."""
    flavor = SERIES[release_series(config.slurm.version)].os
    return f"{SLINKY_REGISTRY}/sackd:{patch_release(config.slurm.version)}-{flavor}"


def context_digest(base: str) -> str:
    """A tag for the image: what goes into the build (the context's agent files and the base), so a changed
    agent is a new tag in the immutable repository and an unchanged one is the same."""
    digest = hashlib.sha256(base.encode())
    for path in sorted([CONTEXT / "__init__.py", *(CONTEXT / "agent").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(f"\0{path.relative_to(CONTEXT)}\0".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def lifecycle_policy() -> str:
    return json.dumps({"rules": [{"rulePriority": 1, "description": f"keep the last {KEEP_IMAGES} agent images",
                                  "selection": {"tagStatus": "any", "countType": "imageCountMoreThan",
                                                "countNumber": KEEP_IMAGES},
                                  "action": {"type": "expire"}}]})


def agent_image(name: str, config: ClusterConfig, cluster_name: str, opts: pulumi.ResourceOptions) -> AgentImage:
    """The image the agents' pods run: `slurm.images.agent`, or the image built here, by its digest."""
    if config.slurm.images.agent:
        return AgentImage(config.slurm.images.agent, config.slurm.images.agent)
    return AgentImageBuild(name, config, cluster_name, opts).image


class AgentImageBuild(pulumi.ComponentResource):
    """The stack's ECR repository and the image built and pushed into it."""

    image: AgentImage

    def __init__(self, name: str, config: ClusterConfig, cluster_name: str, opts: pulumi.ResourceOptions) -> None:
        super().__init__("slurm-eks:index:AgentImage", name, None, opts)
        self.image = _build(name, config, cluster_name, pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def _build(name: str, config: ClusterConfig, cluster_name: str, opts: pulumi.ResourceOptions) -> AgentImage:
    repository = aws.ecr.Repository(
        name, name=f"{cluster_name}/{REPOSITORY}",
        # A tag once pushed names those bytes for good; each scan finds the base image's known CVEs on push.
        image_tag_mutability="IMMUTABLE",
        image_scanning_configuration={"scan_on_push": True},
        encryption_configurations=[{"encryption_type": "KMS"}],
        opts=opts)
    aws.ecr.LifecyclePolicy(name, repository=repository.name, policy=lifecycle_policy(), opts=opts)
    auth = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id,
                                                  opts=pulumi.InvokeOutputOptions(parent=opts.parent))
    base = base_image(config)
    tag = context_digest(base)
    image = docker_build.Image(
        name,
        context={"location": str(CONTEXT.relative_to(PROJECT_ROOT))},
        dockerfile={"location": str(DOCKERFILE.relative_to(PROJECT_ROOT))},
        build_args={"SACKD_IMAGE": base},
        platforms=[PLATFORM],
        tags=[repository.repository_url.apply(lambda url: f"{url}:{tag}")],
        push=True,
        # `pulumi preview` (the PR workflow) needs no Docker: the digest is unknown there, as in the offline plan.
        build_on_preview=False,
        registries=[{"address": repository.repository_url, "username": auth.user_name,
                     "password": auth.password}],
        opts=opts)
    return AgentImage(image.ref, tag)
