"""Slurm security advisories: which releases each one affects, so `slurm.version` (and a Slinky image of a Slurm
release set in `slurm.images`) is refused while a published fix exists. A table the config rule `slurm-advisories`
and the policy pack read; no Pulumi here.

Each entry names its CVEs, the first fixed patch release of every series it lists, and where that is published.
A release of a listed series older than its fix is affected; a series the advisory does not list but which is older
than every series it lists is affected too (SchedMD fixes only its supported series: "All Slurm versions prior to
..."). Add an advisory here when SchedMD announces one (slurm-announce, the series' CHANGELOG), with its sources.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Advisory:
    id: str  # ours, "schedmd-<year>-<month>" of SchedMD's release: what a waiver may name instead of a CVE
    cves: tuple[str, ...]
    fixed: dict[str, str]  # series -> first patch release with the fix
    sources: tuple[str, ...]

    def affects(self, release: str) -> bool:
        """Whether the patch release `release` ("25.11.7") carries the advisory's flaws."""
        series = ".".join(release.split(".")[:2])
        if series in self.fixed:
            return _key(release) < _key(self.fixed[series])
        return _key(series) < min(_key(s) for s in self.fixed)

    def summary(self) -> str:
        fixes = ", ".join(self.fixed[s] for s in sorted(self.fixed, key=_key))
        return f"{', '.join(self.cves)} (advisory {self.id}; fixed in {fixes}; {self.sources[0]})"


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


ADVISORIES = (
    # SchedMD's 2026-09 security releases. Sources: SchedMD/slurm CHANGELOG/slurm-25.11.md "Changes in 25.11.8"
    # (tag slurm-25-11-8-1), slurm-25.05.md "Changes in 25.05.9", slurm-26.05.md "Changes in 26.05.4";
    # aws/aws-parallelcluster#7601 ("All Slurm versions prior to 25.05.9, 25.11.8, and 26.05.4 are impacted");
    # openhpc/ohpc#2670 (25.11.8), #2686 (25.05.9).
    Advisory(
        id="schedmd-2026-09",
        cves=("CVE-2026-65107", "CVE-2026-65108", "CVE-2026-65109", "CVE-2026-65138", "CVE-2026-65139",
              "CVE-2026-65140", "CVE-2026-65165", "CVE-2026-65168"),
        fixed={"25.05": "25.05.9", "25.11": "25.11.8", "26.05": "26.05.4"},
        sources=("https://github.com/aws/aws-parallelcluster/issues/7601",
                 "https://github.com/SchedMD/slurm/blob/slurm-25.11/CHANGELOG/slurm-25.11.md#changes-in-25118"),
    ),
)


def advisories_for(release: str) -> list[Advisory]:
    """The advisories whose flaws the patch release `release` carries."""
    return [a for a in ADVISORIES if a.affects(release)]
