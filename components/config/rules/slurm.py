"""Rules on Slurm itself: the version Slinky runs. Images pinned to exact releases are the policy pack's rule
(images-pinned: every image of every pod, the stack's and the program's own; docs/ci-and-policies.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.rules.registry import Found, rule
from components.config.slinky_releases import DIGEST, SERIES, release_series

MIN_SLURM = (25, 11)  # and Slurm >= 25.11


@rule("slurm-version")
def slurm_version(c: ClusterConfig) -> Iterator[Found]:
    version = c.slurm.version
    m = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", version)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_SLURM:
        yield Found("slurm.version", version, "Slinky 1.2.x runs Slurm 25.11 and newer only",
                    'use "25.11" (or a patch release such as "25.11.6"), quoted')
    elif release_series(version) not in SERIES:
        yield Found("slurm.version", version, f"Slinky publishes no images for Slurm {release_series(version)}",
                    f"use one of {', '.join(SERIES)}, or set every slurm.images entry yourself")




@rule("agent-image-digest")
def agent_image_digest(c: ClusterConfig) -> Iterator[Found]:
    """The agents run with the cluster's slurm.key and edit its accounts: a tag that can move is refused, not
    warned about (components/slinky/agent_image.py)."""
    image = c.slurm.images.agent
    if image is not None and not DIGEST.search(image):
        yield Found("slurm.images.agent", image, "the agent image must be pinned by digest",
                    "use <registry>/slurm-eks-agent@sha256:<64 hex digits> (`docker buildx imagetools inspect` "
                    "prints it), or remove the key to have `pulumi up` build it into the stack's ECR repository")
