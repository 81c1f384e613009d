"""Rules on the cluster itself: region, Kubernetes version and its pinned add-ons, name, admin roles, node image."""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from components.config.addon_versions import ADDON_VERSIONS
from components.config.cluster import ClusterConfig
from components.config.rules.registry import Found, rule

MIN_KUBERNETES = (1, 29)  # Slinky 1.2.x needs Kubernetes >= 1.29


REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")


def _kubernetes_minor(version: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"1\.(\d+)", version)
    return (1, int(m.group(1))) if m else None


@cache
def aws_regions() -> tuple[str, frozenset[str]]:
    """botocore's version and the regions of every AWS partition its bundled partitions.json lists (the data
    boto3 resolves endpoints from), read as a file: importing botocore would cost `validate` its start-up."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        return "", frozenset()
    root = Path(next(iter(spec.submodule_search_locations)))
    version = re.search(r"__version__ = '([^']+)'", (root / "__init__.py").read_text())
    data = json.loads((root / "data" / "partitions.json").read_text())
    regions = {r for part in data["partitions"] for r in part["regions"] if not r.endswith("-global")}
    return (version.group(1) if version else "?"), frozenset(regions)


def known_region(region: str) -> bool:
    """True when `region` is a region AWS has (or botocore is missing, and nobody can tell)."""
    _, regions = aws_regions()
    return not regions or region in regions


@rule("region")
def region_format(c: ClusterConfig) -> Iterator[Found]:
    if not REGION.match(c.region):
        yield Found("region", c.region, "not an AWS region name", "use a region such as us-west-2")
    elif not known_region(c.region):
        version, regions = aws_regions()
        close = difflib.get_close_matches(c.region, sorted(regions), n=1, cutoff=0.8)
        hint = f"did you mean {close[0]}? " if close else ""
        yield Found("region", c.region, f"not a region AWS has (botocore {version}'s partitions.json lists every "
                    "region of every AWS partition)", f"{hint}use a region such as us-west-2; if AWS opened it after "
                    f"botocore {version}, upgrade boto3")


@rule("kubernetes-version")
def kubernetes_version(c: ClusterConfig) -> Iterator[Found]:
    version = _kubernetes_minor(c.kubernetes_version)
    if version is None:
        yield Found("kubernetesVersion", c.kubernetes_version, "not a Kubernetes minor version",
                    'quote it as a string like "1.33" (YAML reads 1.30 as the number 1.3)')
    elif version < MIN_KUBERNETES:
        yield Found("kubernetesVersion", c.kubernetes_version,
                    "Slinky slurm-operator 1.2.x supports Kubernetes 1.29 and newer only",
                    'use "1.29" or newer (EKS standard support: see `slurm-eks preflight`)')


@rule("kubernetes-version-pinned")
def kubernetes_version_pinned(c: ClusterConfig) -> Iterator[Found]:
    """A Kubernetes version is deployable once its EKS add-on versions are pinned (and so checked)."""
    if _kubernetes_minor(c.kubernetes_version) is not None and c.kubernetes_version not in ADDON_VERSIONS:
        yield Found("kubernetesVersion", c.kubernetes_version,
                    f"no pinned EKS add-on versions for it (this release pins {', '.join(ADDON_VERSIONS)})",
                    "use a pinned version, or add its row to components/config/addon_versions.py from the EKS user "
                    "guide's add-on tables, with a nodeImage.release for it")


@rule("cluster-name")
def cluster_name(c: ClusterConfig) -> Iterator[Found]:
    if c.cluster_name is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,37}", c.cluster_name):
        yield Found("clusterName", c.cluster_name,
                    "EKS cluster names start with a letter and hold letters, digits and '-'",
                    "use up to 38 characters such as ml-training-prod (room for derived IAM names)")


@rule("admin-role-arn")
def admin_role_arns(c: ClusterConfig) -> Iterator[Found]:
    for i, arn in enumerate(c.admin_role_arns):
        if not re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:role/.+", arn):
            yield Found(f"adminRoleArns[{i}]", arn, "not an IAM role ARN",
                        "use arn:aws:iam::<account>:role/<name>")


# An EKS managed node group AMI release version: `<kubernetes major.minor.patch>-<YYYYMMDD>`, as
# awslabs/amazon-eks-ami CHANGELOG.md lists them ("Release version", e.g. 1.33.13-20260714).
NODE_IMAGE_RELEASE = re.compile(r"^(1\.\d+)\.\d+-(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$")


@rule("node-image-release")
def node_image_release(c: ClusterConfig) -> Iterator[Found]:
    release = c.node_image.release
    match = NODE_IMAGE_RELEASE.match(release)
    if match is None:
        yield Found("nodeImage.release", release, "not an EKS AL2023 AMI release version",
                    "use <kubernetes patch>-<YYYYMMDD> as awslabs/amazon-eks-ami's CHANGELOG lists it for your "
                    "Kubernetes version, e.g. 1.33.13-20260714")
    elif match.group(1) != c.kubernetes_version:
        yield Found("nodeImage.release", release,
                    f"an AMI for Kubernetes {match.group(1)}, but kubernetesVersion is {c.kubernetes_version}",
                    f"pick the {c.kubernetes_version} release version of the same AMI release in awslabs/"
                    "amazon-eks-ami's CHANGELOG")


@rule("login-nodes")
def login_nodes(c: ClusterConfig) -> Iterator[Found]:
    if c.login_nodes.max_size < c.login_nodes.min_size:
        yield Found("loginNodes.maxSize", c.login_nodes.max_size,
                    f"below loginNodes.minSize ({c.login_nodes.min_size})",
                    "set maxSize to at least minSize")
