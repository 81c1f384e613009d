"""Rules on Slurm itself: the version Slinky runs. Images pinned to exact releases are the policy pack's rule
(images-pinned: every image of every pod, the stack's and the program's own; docs/ci-and-policies.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.rules.registry import Found, rule
from components.config.slinky_releases import DIGEST, SERIES, SLINKY_REGISTRY, SLINKY_TAG, patch_release, release_series
from components.config.slurm_advisories import advisories_for

MIN_SLURM = (25, 11)  # and Slurm >= 25.11


@rule("slurm-version")
def slurm_version(c: ClusterConfig) -> Iterator[Found]:
    version = c.slurm.version
    m = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", version)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_SLURM:
        yield Found("slurm.version", version, "Slinky 1.2.x runs Slurm 25.11 and newer only",
                    'use "25.11" (or a patch release such as "25.11.8"), quoted')
    elif release_series(version) not in SERIES:
        yield Found("slurm.version", version, f"Slinky publishes no images for Slurm {release_series(version)}",
                    f"use one of {', '.join(SERIES)}, or set every slurm.images entry yourself")


@rule("slurm-advisories")
def slurm_advisories(c: ClusterConfig) -> Iterator[Found]:
    """A Slurm release with a published security fix it lacks is refused, not warned about: SchedMD's advisories
    are root or cross-user compromises (components/config/slurm_advisories.py). Checked on `slurm.version` and on
    each Slinky image of `slurm.images` whose tag names a release; an image of your own registry names no release
    we can read, so its Slurm is yours to keep patched (docs/security.md)."""
    version = c.slurm.version
    if re.fullmatch(r"\d+\.\d+(\.\d+)?", version) and release_series(version) in SERIES:
        release = patch_release(version)
        for advisory in advisories_for(release):
            series_fix = advisory.fixed.get(release_series(release))
            yield Found("slurm.version", version, f"Slurm {release} is affected by {advisory.summary()}",
                        f'use "{release_series(release)}" (the patched release the project pins)'
                        + (f' or "{series_fix}" or newer' if series_fix else ", a series with the fix"))
    for daemon, image in c.slurm.images.model_dump().items():
        if not image or not image.startswith(f"{SLINKY_REGISTRY}/") or "@" in image:
            continue
        m = SLINKY_TAG.match(image.rsplit(":", 1)[-1])
        for advisory in advisories_for(m["patch"]) if m else ():
            yield Found(f"slurm.images.{daemon}", image, f"Slurm {m['patch']} is affected by {advisory.summary()}",
                        "remove the key (Slinky's image of slurm.version is used) or use a patched release's tag")




@rule("agent-image-digest")
def agent_image_digest(c: ClusterConfig) -> Iterator[Found]:
    """The agents run with the cluster's slurm.key and edit its accounts: a tag that can move is refused, not
    warned about (components/slinky/agent_image.py)."""
    image = c.slurm.images.agent
    if image is not None and not DIGEST.search(image):
        yield Found("slurm.images.agent", image, "the agent image must be pinned by digest",
                    "use <registry>/slurm-eks-agent@sha256:<64 hex digits> (`docker buildx imagetools inspect` "
                    "prints it), or remove the key to have `pulumi up` build it into the stack's ECR repository")
