"""`slurm-eks gitops export`: the offline plan's Kubernetes side as an Argo CD app-of-apps tree.

DIR/root.yaml      the root Application (syncs DIR/apps; in gitops mode Pulumi creates it)
DIR/apps/*.yaml    one Application per Helm Release (chart, pinned version, release name, values), and one per
                   sync wave of plain manifests (manifests-wave-N, syncing DIR/manifests/wave-N)
DIR/manifests/wave-N/<kind>_<namespace>_<name>.yaml   one file per object, as `slurm-eks plan` writes them
DIR/UNRESOLVED.md  every value only `pulumi up` knows, by file and path, left as a placeholder

Sync waves follow the plan's dependencies: an object's wave is one more than the highest wave of what it
depends on (Namespaces, then their NetworkPolicies, then CRD charts, then their users). Kubernetes Secrets are
never exported: they stay with Pulumi.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.addons.gitops_apps import application, git_source, helm_source
from components.config.gitops import APPS_DIR, GitOps
from scripts.offline.mocks import ACCOUNT
from scripts.offline.plan import _kubectl_order, manifest_filename
from scripts.offline.plan_model import KUBERNETES_SECRET_TYPES, SECRET, UNKNOWN, Plan, PlannedResource

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
PLACEHOLDER = "UNRESOLVED"
MANIFESTS_DIR = "manifests"
# An ID the mocks gave an AWS resource (vpc-0..., fs-0..., sg-0...): real only after `pulumi up`.
_MOCK_ID = re.compile(r"^[a-z]+-[0-9a-f]{8,}$")


@dataclass
class Export:
    files: dict[str, Any] = field(default_factory=dict)  # relative path -> YAML document
    unresolved: dict[str, str] = field(default_factory=dict)  # "file: path" -> what the plan had there


def exported(plan: Plan) -> list[PlannedResource]:
    """What Argo CD can own: every Release and every manifest except Secrets."""
    return [r for r in plan.resources if r.type == RELEASE or (r.is_manifest and r.type not in KUBERNETES_SECRET_TYPES)]


def waves(plan: Plan) -> dict[str, int]:
    """Each exported resource's sync wave, from the plan's recorded dependencies (a component stands for
    everything under it)."""
    units = {r.urn for r in exported(plan)}
    by_urn, children = plan.by_urn(), defaultdict(list)
    for r in plan.resources:
        children[r.parent].append(r.urn)

    def under(urn: str) -> set[str]:
        found = {urn} & units
        for child in children[urn]:
            found |= under(child)
        return found

    memo: dict[str, int] = {}

    def wave(urn: str) -> int:
        if urn not in memo:
            deps = {d for dep in by_urn[urn].dependencies if dep in by_urn for d in under(dep)} - {urn}
            memo[urn] = 1 + max(map(wave, deps)) if deps else 0
        return memo[urn]

    return {u: wave(u) for u in units}


def deploy_time_values(plan: Plan) -> set[str]:
    """Values the mocks invented for AWS resources (IDs): only `pulumi up` knows the real ones."""
    return {r.id for r in plan.resources if r.type.startswith("aws:") and r.id and _MOCK_ID.match(r.id)}


def _resolve(value: Any, where: str, path: str, ex: Export, ids: set[str], resolved: dict[str, Any],
             outputs: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _resolve(v, where, f"{path}.{k}" if path else k, ex, ids, resolved, outputs)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, where, f"{path}[{i}]", ex, ids, resolved, outputs) for i, v in enumerate(value)]
    if not isinstance(value, str) or not (UNKNOWN in value or SECRET in value or ACCOUNT in value
                                          or any(i in value for i in ids)):
        return value
    key = f"{where}: {path}"
    if key in resolved:
        return resolved[key]
    named = [k for k, v in outputs.items() if v == value and k in resolved]
    if named and SECRET not in value:
        return resolved[named[0]]
    ex.unresolved[key] = value
    return f"{PLACEHOLDER}({key})"


def build_export(plan: Plan, gitops: GitOps, resolved: dict[str, Any] | None = None) -> Export:
    """The tree as documents. `gitops` says where the tree lives (the manifests Applications' source);
    `resolved` gives real values by "file: path" (as UNRESOLVED.md lists them) or by stack output name."""
    ex, ids, resolved = Export(), deploy_time_values(plan), resolved or {}
    wave_of = waves(plan)
    own_namespaces = {r.inputs["metadata"]["name"] for r in plan.of_type(NAMESPACE)}
    by_wave: dict[int, list[PlannedResource]] = defaultdict(list)
    for r in exported(plan):
        if r.type != RELEASE:
            by_wave[wave_of[r.urn]].append(r)
            continue
        i = r.inputs
        where = f"{APPS_DIR}/{i['name']}.yaml"
        values = _resolve(i.get("values") or {}, where, "spec.source.helm.valuesObject", ex, ids, resolved,
                          plan.outputs)
        source = helm_source(i["chart"], i["version"], (i.get("repositoryOpts") or {}).get("repo"), i["name"], values)
        ex.files[where] = application(i["name"], source, i["namespace"], wave_of[r.urn],
                                      create_namespace=i["namespace"] not in own_namespaces)
    root = gitops.path.strip("/") or "."
    for wave, resources in sorted(by_wave.items()):
        folder = f"{MANIFESTS_DIR}/wave-{wave}"
        for r in resources:
            where = f"{folder}/{manifest_filename(r.inputs)}"
            ex.files[where] = _kubectl_order(_resolve(r.inputs, where, "", ex, ids, resolved, plan.outputs))
        source = git_source(gitops.repo_url, gitops.target_revision, folder if root == "." else f"{root}/{folder}")
        ex.files[f"{APPS_DIR}/{MANIFESTS_DIR}-wave-{wave}.yaml"] = application(
            f"{MANIFESTS_DIR}-wave-{wave}", source, None, wave, create_namespace=False)
    return ex


def write_export(ex: Export, out: Path, readme: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for rel, doc in sorted(ex.files.items()):
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(doc, sort_keys=False))
    (out / "README.md").write_text(readme)
    lines = ["# Values only `pulumi up` knows", "",
             "Each is written as `UNRESOLVED(<file>: <path>)`. Give them with `--values-from FILE` (a JSON object "
             "keyed by the `file: path` below, or by stack output name as `pulumi stack output --json` prints).", ""]
    lines += [f"- `{k}` (plan: `{v}`)" for k, v in sorted(ex.unresolved.items())] or ["None."]
    (out / "UNRESOLVED.md").write_text("\n".join(lines) + "\n")


def differences(plan: Plan, out: Path) -> list[str]:
    """Where the tree in `out` disagrees with the plan: each Release has exactly one Application with its chart,
    version, namespace and values; each exported manifest is there unchanged; nothing else is."""
    found: list[str] = []
    apps = [yaml.safe_load(p.read_text()) for p in sorted((out / APPS_DIR).glob("*.yaml"))]
    helm_apps = [a for a in apps if "chart" in a["spec"]["source"]]
    for r in plan.of_type(RELEASE):
        i = r.inputs
        want = helm_source(i["chart"], i["version"], (i.get("repositoryOpts") or {}).get("repo"), i["name"], {})
        same = [a for a in helm_apps if a["spec"]["source"]["chart"] == want["chart"]
                and a["spec"]["source"]["helm"]["releaseName"] == i["name"]]
        if len(same) != 1:
            found.append(f"release {i['name']}: {len(same)} Applications")
            continue
        src, dest = same[0]["spec"]["source"], same[0]["spec"]["destination"]
        if (src["repoURL"], src["targetRevision"], dest.get("namespace")) != (
                want["repoURL"], i["version"], i["namespace"]):
            found.append(f"release {i['name']}: source or namespace differs")
        if not _same_values(i.get("values") or {}, src["helm"]["valuesObject"]):
            found.append(f"release {i['name']}: values differ")
    if len(helm_apps) != len(plan.of_type(RELEASE)):
        found.append(f"{len(helm_apps)} chart Applications for {len(plan.of_type(RELEASE))} releases")
    files = {p.relative_to(out / MANIFESTS_DIR).parts[-1]: yaml.safe_load(p.read_text())
             for p in (out / MANIFESTS_DIR).rglob("*.yaml")}
    want_files = {manifest_filename(r.inputs): r.inputs for r in exported(plan) if r.type != RELEASE}
    for name in sorted(set(files) - set(want_files)):
        found.append(f"manifest {name}: not in the plan")
    for name, doc in sorted(want_files.items()):
        if name not in files:
            found.append(f"manifest {name}: missing")
        elif not _same_values(doc, files[name]):
            found.append(f"manifest {name}: differs from the plan")
    return found


def _same_values(planned: Any, written: Any) -> bool:
    """Equal, where a placeholder stands only for a value the plan could not know."""
    if isinstance(written, str) and written.startswith(f"{PLACEHOLDER}("):
        return isinstance(planned, str)
    if isinstance(planned, dict) and isinstance(written, dict):
        return planned.keys() == written.keys() and all(_same_values(planned[k], written[k]) for k in planned)
    if isinstance(planned, list) and isinstance(written, list):
        return len(planned) == len(written) and all(map(_same_values, planned, written))
    return planned == written
