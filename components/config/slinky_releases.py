"""The Slurm releases Slinky built images of, its image repositories, and when an image reference is pinned:
tables the config rules (slurm.version) and the policy pack (images-pinned) read, so no Pulumi here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Daemon = Literal["slurmctld", "slurmd", "slurmdbd", "slurmrestd", "login"]

SLINKY_REGISTRY = "ghcr.io/slinkyproject"


@dataclass(frozen=True)
class Series:
    patch: str  # the release `slurm.version: <series>` stands for
    os: str  # the base OS of Slinky's images of this series
    releases: tuple[str, ...]  # every patch release Slinky built images of
    flavors: tuple[str, ...]  # every base OS it built them on


# Slinky tags each image `<series>-<os>`, which moves to every new patch release, and `<patch>-<os>`, which
# does not (SlinkyProject/containers schedmd/slurm/docker-bake.hcl, format_tag). We use the second. The flavors are
# the directories schedmd/slurm/<series>/* at 05efda08 (2026-06-25); the releases every `slurm_version` that
# schedmd/slurm/<series>/<os>/slurm.hcl held in its history (release candidates left out: 25.11.0-25.11.6,
# 26.05.0-26.05.1), then SchedMD's later patch releases of the series (tags slurm-25-11-7-1, slurm-25-11-8-1,
# slurm-26-05-2-1 to slurm-26-05-4-1), whose images Slinky publishes as it does every release ("These OCI container
# images track Slurm releases closely": the repository's docs/index.rst). The pinned patch of each series is its
# newest release with no open security advisory (components/config/slurm_advisories.py: 25.11.8 and 26.05.4 fix
# the eight CVEs of 2026-09). That an image was pushed to ghcr.io cannot be checked offline: `slurm-eks plan`
# says so, and a stack that builds its own sets every slurm.images entry.
SERIES = {
    "25.11": Series("25.11.8", "ubuntu24.04", tuple(f"25.11.{n}" for n in range(9)),
                    ("rockylinux9", "ubuntu24.04")),
    "26.05": Series("26.05.4", "ubuntu26.04", tuple(f"26.05.{n}" for n in range(5)),
                    ("rockylinux9", "ubuntu24.04", "ubuntu26.04")),
}
# The pyxis variants carry enroot + pyxis, so `srun --container-image=...` runs steps in a training image.
SLINKY_REPOSITORIES: dict[Daemon, str] = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd-pyxis",
    "slurmdbd": "slurmdbd",
    "slurmrestd": "slurmrestd",
    "login": "login-pyxis",
}
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# Tags that move: named channels, and a major or major.minor release (`25.11`, `24.04`, `v2`, `25.11-ubuntu24.04`)
# that its publisher re-points at each patch. A tag with a patch release (`2.9.0-gpu-...`) or a dated build is kept.
FLOATING_TAG = re.compile(r"^(latest|stable|edge|main|master|nightly|v?\d+(\.\d+)?(-.*)?)$")
SLINKY_TAG = re.compile(r"^(?P<patch>\d+\.\d+\.\d+)-(?P<flavor>[a-z0-9.]+)$")


def release_series(version: str) -> str:
    """"25.11.8" -> "25.11"."""
    return ".".join(version.split(".")[:2])


def patch_release(version: str) -> str:
    """`slurm.version` as a patch release: "25.11" -> the patch pinned for that series, "25.11.8" -> itself."""
    return SERIES[version].patch if version in SERIES else version


def pinning_problem(image: str) -> str | None:
    """Why `image` may name other bytes tomorrow, or None: a digest, or an exact tag (of Slinky's registry, a
    `<patch>-<os>` tag of a release and OS Slinky built: SERIES)."""
    if DIGEST.search(image):
        return None
    name = image.rsplit("/", 1)[-1]
    if "@" in name:
        return "its digest is not sha256:<64 hex digits>"
    if ":" not in name:
        return "no tag: the runtime pulls :latest, which moves"
    tag = name.rsplit(":", 1)[1]
    if not image.startswith(f"{SLINKY_REGISTRY}/"):
        return f"tag {tag} moves to each new release" if FLOATING_TAG.match(tag) else None
    m = SLINKY_TAG.match(tag)
    if not m:
        return f"tag {tag} is not Slinky's <patch>-<os> tag (its <series>-<os> tags move to each patch release)"
    series = SERIES.get(release_series(m["patch"]))
    if series is None or m["patch"] not in series.releases:
        known = ", ".join(r for s in SERIES.values() for r in s.releases)
        return f"Slinky built no images of Slurm {m['patch']} (known releases: {known})"
    if m["flavor"] not in series.flavors:
        return f"Slinky built no {m['flavor']} images of Slurm {release_series(m['patch'])} " \
               f"(flavors: {', '.join(series.flavors)})"
    return None
