"""Rules on Slurm itself: the version Slinky runs. Images pinned to exact releases are the policy pack's rule
(images-pinned: every image of every pod, the stack's and the program's own; docs/ci-and-policies.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config import advisory_waivers
from components.config.cluster import ClusterConfig
from components.config.rules.registry import Found, rule, stack_rule
from components.config.slinky_releases import DIGEST, SERIES, SLINKY_REGISTRY, SLINKY_TAG, patch_release, release_series
from components.config.slurm_advisories import Advisory, advisories_for
from components.config.stack_context import StackContext

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


@stack_rule("slurm-advisories")
def slurm_advisories(c: ClusterConfig, stack: StackContext) -> Iterator[Found]:
    """A Slurm release with a published security fix it lacks is refused, not warned about: SchedMD's advisories
    are root or cross-user compromises (components/config/slurm_advisories.py). Checked on `slurm.version` and on
    each Slinky image of `slurm.images` whose tag names a release; an image of your own registry names no release
    we can read, so its Slurm is yours to keep patched (docs/security.md). The stack's pack config may waive an
    advisory until a date (components/config/advisory_waivers.py): then a warning, after it an error."""
    try:
        waivers = advisory_waivers.read(stack.pack_config_file)
    except advisory_waivers.WaiverError as exc:
        yield Found("", None, f"advisory waiver: {exc}", f"state each waiver as {advisory_waivers.EXAMPLE}")
        waivers = []
    affecting: list[Advisory] = []
    for path, value, release, fix in _slurm_releases(c):
        advisories = advisories_for(release)
        affecting += advisories
        for verdict in advisory_waivers.judge(advisories, waivers, stack.date):
            message = f"Slurm {release} is affected by {verdict.advisory.summary()}{verdict.note()}"
            if verdict.expired:
                fix = f"{fix}; or {advisory_waivers.RENEW}"
            elif verdict.waived:
                fix = f"{fix} before the waiver expires"
            yield Found(path, value, message, fix, "warning" if verdict.waived else None)
    for waiver in advisory_waivers.stale(waivers, affecting):
        yield Found("slurm.version", c.slurm.version,
                    f"stale {waiver.describe()}: no advisory it names affects the Slurm releases this stack runs",
                    f"remove it from {stack.pack_config_file}", "warning")


def _slurm_releases(c: ClusterConfig) -> Iterator[tuple[str, str, str, str]]:
    """(path, value, patch release, fix) of every Slurm release the config names that we can read."""
    version = c.slurm.version
    if re.fullmatch(r"\d+\.\d+(\.\d+)?", version) and release_series(version) in SERIES:
        release = patch_release(version)
        series_fix = max((a.fixed.get(release_series(release), "") for a in advisories_for(release)), key=_key,
                         default="")
        yield ("slurm.version", version, release, f'use "{release_series(release)}" (the patched release the '
               "project pins)" + (f' or "{series_fix}" or newer' if series_fix else ", a series with the fix"))
    for daemon, image in c.slurm.images.model_dump().items():
        if not image or not image.startswith(f"{SLINKY_REGISTRY}/") or "@" in image:
            continue
        m = SLINKY_TAG.match(image.rsplit(":", 1)[-1])
        if m:
            yield (f"slurm.images.{daemon}", image, m["patch"],
                   "remove the key (Slinky's image of slurm.version is used) or use a patched release's tag")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")) if version else ()




@rule("agent-image-digest")
def agent_image_digest(c: ClusterConfig) -> Iterator[Found]:
    """The agents run with the cluster's slurm.key and edit its accounts: a tag that can move is refused, not
    warned about (components/slinky/agent_image.py)."""
    image = c.slurm.images.agent
    if image is not None and not DIGEST.search(image):
        yield Found("slurm.images.agent", image, "the agent image must be pinned by digest",
                    "use <registry>/slurm-eks-agent@sha256:<64 hex digits> (`docker buildx imagetools inspect` "
                    "prints it), or remove the key to have `pulumi up` build it into the stack's ECR repository")
