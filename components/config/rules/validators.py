"""Semantic rules for a stack config, one named validator per rule.

Each validator yields `Finding`s; the registry stamps them with the rule's name and severity. Every
message says what is wrong, the path says where, and the fix says how to put it right.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from components.aws.addon_versions import ADDON_VERSIONS
from components.compute import catalog
from components.config.cluster import ClusterConfig
from components.config.efs import MODEL_DIRECTORY
from components.config.gitops import HTTPS_URL, SSH_URL
from components.config.k8s_pools import NodeGroup
from components.config.problems import Problem, Severity
from components.lifecycle.health_settings import HEALTH_ACCOUNT
from components.names import WORLD_CIDRS
from components.slinky.images import SERIES, SLINKY_REPOSITORIES, pinning_problem, release_series, slurm_image

MIN_KUBERNETES = (1, 29)  # Slinky 1.2.x needs Kubernetes >= 1.29
MIN_SLURM = (25, 11)  # and Slurm >= 25.11
FSX_THROUGHPUT = {"PERSISTENT_2": (125, 250, 500, 1000)}
FSX_MAX_REPOSITORIES = 8  # data repository associations per file system
K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_PARTITION_NAME = 40  # leaves room for the prefixes of NodePool/NodeSet/Service names (63 chars)
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
SSH_KEY = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)"
                     r" [A-Za-z0-9+/=]+( .*)?$")
S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")


@dataclass(frozen=True)
class Finding:
    path: str
    value: Any
    message: str
    fix: str


Validator = Callable[[ClusterConfig], Iterator[Finding]]
VALIDATORS: dict[str, tuple[Severity, Validator]] = {}


def rule(name: str, severity: Severity = "error") -> Callable[[Validator], Validator]:
    def register(fn: Validator) -> Validator:
        VALIDATORS[name] = (severity, fn)
        return fn

    return register


def run_validators(config: ClusterConfig) -> list[Problem]:
    return [
        Problem(name, severity, f.path, f.value, f.message, f.fix)
        for name, (severity, fn) in VALIDATORS.items()
        for f in fn(config)
    ]


def _known_types(p: NodeGroup) -> list[catalog.InstanceType]:
    return [catalog.CATALOG[t] for t in p.instance_types if t in catalog.CATALOG]


def _node_groups(c: ClusterConfig) -> Iterator[tuple[str, NodeGroup]]:
    """Every partition and Kubernetes pool with its config path: one builder makes their nodes, so the same
    rules hold for both."""
    yield from ((f"partitions.{name}", p) for name, p in c.partitions.items())
    yield from ((f"kubernetesPools.{name}", p) for name, p in c.kubernetes_pools.items())


def _kubernetes_minor(version: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"1\.(\d+)", version)
    return (1, int(m.group(1))) if m else None


# --- cluster -------------------------------------------------------------------------------------------

@rule("region")
def region_format(c: ClusterConfig) -> Iterator[Finding]:
    if not REGION.match(c.region):
        yield Finding("region", c.region, "not an AWS region name", "use a region such as us-west-2")


@rule("kubernetes-version")
def kubernetes_version(c: ClusterConfig) -> Iterator[Finding]:
    version = _kubernetes_minor(c.kubernetes_version)
    if version is None:
        yield Finding("kubernetesVersion", c.kubernetes_version, "not a Kubernetes minor version",
                      'quote it as a string like "1.33" (YAML reads 1.30 as the number 1.3)')
    elif version < MIN_KUBERNETES:
        yield Finding("kubernetesVersion", c.kubernetes_version,
                      "Slinky slurm-operator 1.2.x supports Kubernetes 1.29 and newer only",
                      'use "1.29" or newer (EKS standard support: see `slurm-eks preflight`)')


@rule("kubernetes-version-pinned")
def kubernetes_version_pinned(c: ClusterConfig) -> Iterator[Finding]:
    """A Kubernetes version is deployable once its EKS add-on versions are pinned (and so checked)."""
    if _kubernetes_minor(c.kubernetes_version) is not None and c.kubernetes_version not in ADDON_VERSIONS:
        yield Finding("kubernetesVersion", c.kubernetes_version,
                      f"no pinned EKS add-on versions for it (this release pins {', '.join(ADDON_VERSIONS)})",
                      "use a pinned version, or add its row to components/aws/addon_versions.py from the EKS user "
                      "guide's add-on tables, with a nodeImage.release for it")


@rule("cluster-name")
def cluster_name(c: ClusterConfig) -> Iterator[Finding]:
    if c.cluster_name is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,37}", c.cluster_name):
        yield Finding("clusterName", c.cluster_name,
                      "EKS cluster names start with a letter and hold letters, digits and '-'",
                      "use up to 38 characters such as ml-training-prod (room for derived IAM names)")


@rule("admin-role-arn")
def admin_role_arns(c: ClusterConfig) -> Iterator[Finding]:
    for i, arn in enumerate(c.admin_role_arns):
        if not re.fullmatch(r"arn:aws[a-z-]*:iam::\d{12}:role/.+", arn):
            yield Finding(f"adminRoleArns[{i}]", arn, "not an IAM role ARN",
                          "use arn:aws:iam::<account>:role/<name>")


# An EKS managed node group AMI release version: `<kubernetes major.minor.patch>-<YYYYMMDD>`, as
# awslabs/amazon-eks-ami CHANGELOG.md lists them ("Release version", e.g. 1.33.13-20260714).
NODE_IMAGE_RELEASE = re.compile(r"^(1\.\d+)\.\d+-(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$")


@rule("node-image-release")
def node_image_release(c: ClusterConfig) -> Iterator[Finding]:
    release = c.node_image.release
    match = NODE_IMAGE_RELEASE.match(release)
    if match is None:
        yield Finding("nodeImage.release", release, "not an EKS AL2023 AMI release version",
                      "use <kubernetes patch>-<YYYYMMDD> as awslabs/amazon-eks-ami's CHANGELOG lists it for your "
                      "Kubernetes version, e.g. 1.33.13-20260714")
    elif match.group(1) != c.kubernetes_version:
        yield Finding("nodeImage.release", release,
                      f"an AMI for Kubernetes {match.group(1)}, but kubernetesVersion is {c.kubernetes_version}",
                      f"pick the {c.kubernetes_version} release version of the same AMI release in awslabs/"
                      "amazon-eks-ami's CHANGELOG")


@rule("login-nodes")
def login_nodes(c: ClusterConfig) -> Iterator[Finding]:
    if c.login_nodes.max_size < c.login_nodes.min_size:
        yield Finding("loginNodes.maxSize", c.login_nodes.max_size,
                      f"below loginNodes.minSize ({c.login_nodes.min_size})",
                      "set maxSize to at least minSize")


# --- network -------------------------------------------------------------------------------------------

@rule("network-source")
def network_source(c: ClusterConfig) -> Iterator[Finding]:
    n = c.network
    if n.vpc_cidr and n.vpc_id:
        yield Finding("network", {"vpcCidr": n.vpc_cidr, "vpcId": n.vpc_id},
                      "both a new VPC (vpcCidr) and an existing one (vpcId) are set",
                      "keep vpcCidr to create a VPC, or vpcId + privateSubnetIds to use yours")
    elif not n.vpc_cidr and not n.vpc_id:
        yield Finding("network", None, "no network: neither vpcCidr nor vpcId is set",
                      "set network.vpcCidr (e.g. 10.0.0.0/16) or network.vpcId + network.privateSubnetIds")
    elif n.vpc_id and len(n.private_subnet_ids) < 2:
        yield Finding("network.privateSubnetIds", n.private_subnet_ids,
                      "EKS needs private subnets in at least two availability zones",
                      "list the IDs of two or more private subnets of the VPC")
    elif n.vpc_cidr and n.private_subnet_ids:
        yield Finding("network.privateSubnetIds", n.private_subnet_ids,
                      "subnet IDs are only used with an existing VPC (vpcId)",
                      "remove privateSubnetIds, or replace vpcCidr by vpcId")


@rule("vpc-cidr-size")
def vpc_cidr_size(c: ClusterConfig) -> Iterator[Finding]:
    if c.network.vpc_cidr:
        net = ipaddress.ip_network(c.network.vpc_cidr)
        if net.version != 4 or not 16 <= net.prefixlen <= 20:
            yield Finding("network.vpcCidr", c.network.vpc_cidr,
                          "the VPC must be an IPv4 block between /16 and /20: every pod takes a VPC address",
                          "use a block such as 10.0.0.0/16")


@rule("availability-zones")
def availability_zones(c: ClusterConfig) -> Iterator[Finding]:
    zones = c.network.availability_zones
    if not c.network.vpc_cidr:
        if zones:
            yield Finding("network.availabilityZones", zones,
                          "zones come from the existing subnets when vpcId is set",
                          "remove availabilityZones")
        return
    if len(zones) < 2 or len(set(zones)) != len(zones):
        yield Finding("network.availabilityZones", zones,
                      "a new VPC needs two or more distinct availability zones (EKS requires two)",
                      f"list zones such as [{c.region}a, {c.region}b, {c.region}c]")
    if len(zones) > 7:
        yield Finding("network.availabilityZones", zones, "at most 7 zones fit the subnet layout",
                      "list 2 to 7 zones")
    for i, zone in enumerate(zones):
        if not re.fullmatch(re.escape(c.region) + r"[a-z]", zone):
            yield Finding(f"network.availabilityZones[{i}]", zone, f"not a zone of region {c.region}",
                          f"use a zone name such as {c.region}a")


@rule("efa-zone")
def efa_zone(c: ClusterConfig) -> Iterator[Finding]:
    zone = c.network.efa_availability_zone
    efa = [where for where, p in _node_groups(c) if p.efa]
    if efa and not zone:
        names = ", ".join(efa)
        yield Finding("network.efaAvailabilityZone", None,
                      f"node groups with efa: true ({names}) need one zone: EFA traffic does not cross zones",
                      "set network.efaAvailabilityZone to the zone that holds your capacity")
    if zone and c.network.vpc_cidr and zone not in c.network.availability_zones:
        yield Finding("network.efaAvailabilityZone", zone, "not one of network.availabilityZones",
                      f"use one of {c.network.availability_zones}")
    if zone and not zone.startswith(c.region):
        yield Finding("network.efaAvailabilityZone", zone, f"not a zone of region {c.region}",
                      f"use a zone such as {c.region}a")


@rule("api-endpoint-open", "warning")
def api_endpoint_open(c: ClusterConfig) -> Iterator[Finding]:
    for i, cidr in enumerate(c.network.api_public_cidrs):
        if cidr in WORLD_CIDRS:
            yield Finding(f"network.apiPublicCidrs[{i}]", cidr,
                          "the Kubernetes API endpoint would be reachable from the whole internet",
                          "list your office/VPN/CI ranges instead, or leave it empty for a private endpoint")


@rule("api-deployer")
def api_deployer(c: ClusterConfig) -> Iterator[Finding]:
    """`pulumi up` installs Helm releases and Kubernetes objects through the EKS API: from where?"""
    net, deployer = c.network, c.network.deployer
    if deployer is None:
        if not net.api_public_cidrs:
            yield Finding("network.deployer", None,
                          "the EKS API endpoint is private and nothing says where `pulumi up` runs: from a "
                          "laptop or a hosted CI runner every Helm release and Kubernetes object would fail",
                          "add network.deployer: {via: public, cidrs: [<your CI/office range>]}, or {via: vpc, "
                          "cidrs: [...]} for a runner inside the VPC (docs/operating.md, Deploying privately)")
        return
    if deployer.via == "vpc" and net.creates_vpc:
        yield Finding("network.deployer.via", "vpc",
                      "a deployer inside the VPC cannot exist before the `pulumi up` that creates the VPC",
                      "deploy into an existing VPC (network.vpcId) that holds the runner, or use via: public")
    for i, cidr in enumerate(deployer.cidrs):
        if cidr in WORLD_CIDRS:
            yield Finding(f"network.deployer.cidrs[{i}]", cidr, "the whole internet is not a deployer",
                          "list the CI runner's or office's range")


# --- storage -------------------------------------------------------------------------------------------

@rule("fsx-capacity")
def fsx_capacity(c: ClusterConfig) -> Iterator[Finding]:
    fsx = c.storage.fsx
    if fsx.capacity_gib not in (1200, 2400) and fsx.capacity_gib % 2400:
        yield Finding("storage.fsx.capacityGiB", fsx.capacity_gib,
                      f"{fsx.deployment_type} (SSD) accepts 1200, 2400, or a multiple of 2400 GiB",
                      f"use 1200, 2400, 4800, 7200, ...; nearest: {_nearest_capacity(fsx.capacity_gib)}")


def _nearest_capacity(gib: int) -> int:
    allowed = [1200, *range(2400, max(gib, 2400) + 2401, 2400)]
    return min(allowed, key=lambda a: (abs(a - gib), a))


@rule("fsx-throughput")
def fsx_throughput(c: ClusterConfig) -> Iterator[Finding]:
    fsx = c.storage.fsx
    allowed = FSX_THROUGHPUT.get(fsx.deployment_type)
    if allowed is None and fsx.throughput_per_tib is not None:
        yield Finding("storage.fsx.throughputPerTiB", fsx.throughput_per_tib,
                      f"{fsx.deployment_type} has a fixed throughput (200 MB/s per TiB)",
                      "remove throughputPerTiB, or use deploymentType PERSISTENT_2")
    if allowed and fsx.throughput_per_tib not in allowed:
        yield Finding("storage.fsx.throughputPerTiB", fsx.throughput_per_tib,
                      f"{fsx.deployment_type} needs a throughput per TiB of {', '.join(map(str, allowed))}",
                      "set throughputPerTiB to one of those (MB/s per TiB of storage)")


@rule("fsx-repositories")
def fsx_repositories(c: ClusterConfig) -> Iterator[Finding]:
    fsx = c.storage.fsx
    if fsx.repositories and fsx.deployment_type != "PERSISTENT_2":
        yield Finding("storage.fsx.repositories", [r.path for r in fsx.repositories],
                      "S3 data repository associations need a PERSISTENT_2 file system",
                      "use deploymentType PERSISTENT_2, or remove repositories")
    if len(fsx.repositories) > FSX_MAX_REPOSITORIES:
        yield Finding("storage.fsx.repositories", len(fsx.repositories),
                      f"a file system holds at most {FSX_MAX_REPOSITORIES} data repository associations",
                      "merge prefixes into fewer repositories")
    paths: list[str] = []
    for i, repo in enumerate(fsx.repositories):
        where = f"storage.fsx.repositories[{i}]"
        if not re.fullmatch(r"/[A-Za-z0-9._/-]*[A-Za-z0-9._-]", repo.path) or "//" in repo.path:
            yield Finding(f"{where}.path", repo.path, "not an absolute directory path in the file system",
                          "use a path such as /data (no trailing slash)")
        for other in paths:
            if repo.path == other or repo.path.startswith(other + "/") or other.startswith(repo.path + "/"):
                yield Finding(f"{where}.path", repo.path, f"overlaps the repository at {other}",
                              "give each repository its own directory, not nested in another")
        paths.append(repo.path)
        if not S3_URI.match(repo.s3):
            yield Finding(f"{where}.s3", repo.s3, "not an S3 URI", "use s3://bucket/prefix")
        if not repo.import_events and not repo.export_events:
            yield Finding(where, repo.path, "neither import nor export events: the link would never sync",
                          "add import: [NEW, CHANGED, DELETED] and/or export: [NEW, CHANGED, DELETED]")


@rule("fsx-backups")
def fsx_backups(c: ClusterConfig) -> Iterator[Finding]:
    fsx = c.storage.fsx
    path = "storage.fsx.automaticBackupRetentionDays"
    if not fsx.deployment_type.startswith("PERSISTENT"):
        if fsx.automatic_backup_retention_days:
            yield Finding(path, fsx.automatic_backup_retention_days,
                          f"{fsx.deployment_type} file systems take no backups (FSx backs up PERSISTENT only)",
                          "remove automaticBackupRetentionDays, or use deploymentType PERSISTENT_2")
    elif not fsx.automatic_backup_retention_days:
        yield Finding(path, fsx.automatic_backup_retention_days,
                      "a persistent file system without automatic backups: a deleted file is gone for good",
                      "keep at least 1 day (the default is 7)")


@rule("fsx-export-deletes")
def fsx_export_deletes(c: ClusterConfig) -> Iterator[Finding]:
    for i, repo in enumerate(c.storage.fsx.repositories):
        if "DELETED" in repo.export_events:
            yield Finding(f"storage.fsx.repositories[{i}].export", list(repo.export_events),
                          f"export DELETED makes every file removed under {repo.path} (a pruned checkpoint, an rm "
                          f"by mistake) delete its object in {repo.s3}: S3 would lose the only other copy",
                          "export [NEW, CHANGED] only, and prune S3 with a lifecycle rule if it must shrink")


@rule("efs-throughput")
def efs_throughput(c: ClusterConfig) -> Iterator[Finding]:
    """A provisioned rate goes with, and only with, throughputMode provisioned (EFS API CreateFileSystem:
    ProvisionedThroughputInMibps is required for provisioned and refused otherwise)."""
    efs = c.storage.efs
    if efs is None:
        return
    rate = efs.provisioned_throughput_mibps
    if efs.throughput_mode == "provisioned" and rate is None:
        yield Finding("storage.efs.provisionedThroughputMibps", None,
                      "throughputMode provisioned needs the rate to provision",
                      "set provisionedThroughputMibps (MiB/s), or use throughputMode elastic")
    elif efs.throughput_mode != "provisioned" and rate is not None:
        yield Finding("storage.efs.provisionedThroughputMibps", rate,
                      f"throughputMode {efs.throughput_mode} takes no provisioned rate",
                      "remove provisionedThroughputMibps, or use throughputMode provisioned")


@rule("efs-performance-mode", "warning")
def efs_performance_mode(c: ClusterConfig) -> Iterator[Finding]:
    # docs.aws.amazon.com/efs/latest/ug/performance.html: Max I/O has higher per-operation latencies; AWS
    # recommends General Purpose always. The mode is fixed at creation.
    if c.storage.efs is not None and c.storage.efs.performance_mode == "maxIO":
        yield Finding("storage.efs.performanceMode", "maxIO",
                      "Max I/O has higher per-operation latency than General Purpose, and cannot be changed later",
                      "use performanceMode generalPurpose (the default), as AWS recommends")


@rule("efs-gid-range")
def efs_gid_range(c: ClusterConfig) -> Iterator[Finding]:
    efs = c.storage.efs
    if efs is not None and efs.gid_range_start >= efs.gid_range_end:
        yield Finding("storage.efs.gidRangeEnd", efs.gid_range_end,
                      f"the access point GID range is empty: it must end above gidRangeStart {efs.gid_range_start}",
                      "set gidRangeEnd above gidRangeStart (the driver's defaults: 50000 to 60000)")
    if efs is not None and efs.gid_range_start <= efs.model_owner_id <= efs.gid_range_end:
        yield Finding("storage.efs.modelOwnerId", efs.model_owner_id,
                      f"the models' owner is inside the efs-ap GID range {efs.gid_range_start}-{efs.gid_range_end}: "
                      "a user's dynamically provisioned directory could act as the models' owner",
                      "pick a modelOwnerId outside gidRangeStart..gidRangeEnd (default 40000)")
    if efs is not None and f"{efs.base_path.rstrip('/')}/".startswith(f"{MODEL_DIRECTORY}/"):
        yield Finding("storage.efs.basePath", efs.base_path,
                      f"dynamically provisioned directories would land inside the models' directory {MODEL_DIRECTORY}",
                      "set basePath outside /models (default /claims)")


# CloudWatch Logs PutRetentionPolicy: the retentionInDays values it accepts (CloudWatch Logs API Reference).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)


@rule("flow-log-retention")
def flow_log_retention(c: ClusterConfig) -> Iterator[Finding]:
    days = c.network.flow_log_retention_days
    if days not in LOG_RETENTION_DAYS:
        nearest = min(LOG_RETENTION_DAYS, key=lambda d: (abs(d - days), d))
        yield Finding("network.flowLogRetentionDays", days, "CloudWatch Logs does not accept this retention",
                      f"use one of {', '.join(map(str, LOG_RETENTION_DAYS))}; nearest: {nearest}")


# --- slurm ---------------------------------------------------------------------------------------------

@rule("login-public-ssh")
def login_public_ssh(c: ClusterConfig) -> Iterator[Finding]:
    login = c.slurm.login
    for i, cidr in enumerate(login.allowed_cidrs):
        if cidr in WORLD_CIDRS and not login.allow_public_ssh:
            yield Finding(f"slurm.login.allowedCidrs[{i}]", cidr,
                          "SSH to the login pods would be open to the whole internet",
                          "list your office/VPN ranges, or set slurm.login.allowPublicSsh: true to mean it (the "
                          "policy pack's no-world-ssh rule also needs a waiver in policy/config/<stack>.json)")


def key_findings(path: str, keys: list[str]) -> Iterator[Finding]:
    """Each entry must be one OpenSSH public key line, and never a private key."""
    for i, key in enumerate(keys):
        if "PRIVATE KEY" in key:
            yield Finding(f"{path}[{i}]", "[a private key]", "this is a PRIVATE key: never put it in a stack file",
                          "remove it now, rotate it, and list the matching public key (~/.ssh/id_*.pub)")
        elif not SSH_KEY.match(key.strip()):
            yield Finding(f"{path}[{i}]", key[:40], "not an OpenSSH public key",
                          "paste one line of ~/.ssh/id_ed25519.pub")


@rule("login-ssh-keys")
def login_ssh_keys(c: ClusterConfig) -> Iterator[Finding]:
    yield from key_findings("slurm.login.rootSshKeys", c.slurm.login.root_ssh_keys)


@rule("login-no-keys", "warning")
def login_no_keys(c: ClusterConfig) -> Iterator[Finding]:
    if c.slurm.login.replicas and not c.slurm.login.root_ssh_keys and c.slurm.identity.mode == "none":
        yield Finding("slurm.identity", {}, "no users and no directory: nobody can log in to the login pods",
                      "declare people under slurm.identity.users (or slurm.identity.ldap)")


@rule("slurm-version")
def slurm_version(c: ClusterConfig) -> Iterator[Finding]:
    version = c.slurm.version
    m = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", version)
    if not m or (int(m.group(1)), int(m.group(2))) < MIN_SLURM:
        yield Finding("slurm.version", version, "Slinky 1.2.x runs Slurm 25.11 and newer only",
                      'use "25.11" (or a patch release such as "25.11.6"), quoted')
    elif release_series(version) not in SERIES:
        yield Finding("slurm.version", version, f"Slinky publishes no images for Slurm {release_series(version)}",
                      f"use one of {', '.join(SERIES)}, or set every slurm.images entry yourself")


@rule("image-pinned")
def image_pinned(c: ClusterConfig) -> Iterator[Finding]:
    """Every image the cluster runs: the overrides, and Slinky's images of `slurm.version` (slurm-version
    reports a series Slinky has none of)."""
    images = {f"slurm.images.{d}": slurm_image(c.slurm, d) for d in SLINKY_REPOSITORIES if getattr(c.slurm.images, d)}
    if release_series(c.slurm.version) in SERIES:
        defaults = {slurm_image(c.slurm, d) for d in SLINKY_REPOSITORIES if not getattr(c.slurm.images, d)}
        problems = {problem for image in defaults if (problem := pinning_problem(image))}
        for problem in sorted(problems):
            yield Finding("slurm.version", c.slurm.version, f"not pinned: {problem}",
                          f"use a release Slinky built ({', '.join(SERIES)} or one of their patch releases), "
                          "or set every slurm.images entry")
    images |= {f"partitions.{n}.image": p.image for n, p in c.partitions.items() if p.image}
    for path, image in images.items():
        if problem := pinning_problem(image):
            yield Finding(path, image, f"not pinned: {problem}: what runs changes at the next pod start",
                          "name an exact tag or digest, e.g. repo/image:25.11.6-ubuntu24.04 or repo/image@sha256:...")


# --- partitions ----------------------------------------------------------------------------------------

@rule("partition-name")
def partition_name(c: ClusterConfig) -> Iterator[Finding]:
    for name in c.partitions:
        if not K8S_NAME.match(name) or len(name) > MAX_PARTITION_NAME:
            yield Finding(f"partitions.{name}", name,
                          "partition names become Slurm partitions and Kubernetes object names",
                          f"use lowercase letters, digits and '-' (at most {MAX_PARTITION_NAME}), "
                          "starting and ending with a letter or digit, e.g. gpu-h100")


@rule("instance-type-known")
def instance_type_known(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        for i, t in enumerate(p.instance_types):
            if t not in catalog.CATALOG:
                near = catalog.nearest_instance_types(t)
                hint = f"did you mean {' or '.join(near)}?" if near else ""
                yield Finding(f"{where}.instanceTypes[{i}]", t,
                              "not in the instance catalog (components/compute/catalog.py)",
                              f"{hint} known: {', '.join(catalog.CATALOG)}".strip())


@rule("partition-accelerators")
def partition_accelerators(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        kinds = {(t.accelerator, t.accelerator_model, t.accelerators) for t in _known_types(p)}
        if len(kinds) > 1:
            seen = ", ".join(f"{t.name}={t.accelerators}x{t.accelerator_model}" for t in _known_types(p))
            yield Finding(f"{where}.instanceTypes", p.instance_types,
                          f"mixes accelerators ({seen}): a partition or pool is one kind and count per node",
                          "split these instance types into separate partitions (or pools)")


@rule("efa-supported")
def efa_supported(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        if p.efa:
            lacking = [t.name for t in _known_types(p) if not t.has_efa]
            if lacking:
                yield Finding(f"{where}.efa", True, f"{', '.join(lacking)} has no EFA interface",
                              "set efa: false, or use instance types with EFA (p4d, p5, trn1, ...)")


@rule("efa-interface-count", "warning")
def efa_interface_count(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        counts = sorted({t.efa_interfaces for t in _known_types(p)})
        if p.efa and len(counts) > 1:
            yield Finding(f"{where}.instanceTypes", p.instance_types,
                          f"EFA interface counts differ ({counts}); each node requests {counts[0]}",
                          "split the types into partitions to use every interface")


@rule("efa-capacity-type", "warning")
def efa_capacity_type(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        if p.efa and p.capacity_type == "spot":
            yield Finding(f"{where}.capacityType", "spot",
                          "a multi-node EFA job loses every rank when one spot node is reclaimed",
                          "use on-demand, reserved or capacity-block for EFA partitions")


@rule("node-counts")
def node_counts(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        if p.min_nodes > p.max_nodes:
            yield Finding(f"{where}.minNodes", p.min_nodes,
                          f"minNodes is larger than maxNodes ({p.max_nodes})",
                          "keep 0 <= minNodes <= maxNodes")
        if p.max_nodes == 0:
            noun = "partition" if where.startswith("partitions.") else "pool"
            yield Finding(f"{where}.maxNodes", 0, f"a {noun} that can never have a node",
                          "set maxNodes >= 1, or remove it")


@rule("capacity-reservations")
def capacity_reservations(c: ClusterConfig) -> Iterator[Finding]:
    for where, p in _node_groups(c):
        if p.reserved and not p.capacity_reservation_ids:
            what = "capacity reservations" if p.capacity_type == "reserved" else "capacity reservations of its blocks"
            yield Finding(f"{where}.capacityReservationIds", [],
                          f"capacityType {p.capacity_type} needs the {what} to launch into",
                          "list them, e.g. capacityReservationIds: [cr-0123456789abcdef0]")
        for i, cr in enumerate(p.capacity_reservation_ids):
            if not re.fullmatch(r"cr-[0-9a-f]{8,17}", cr):
                yield Finding(f"{where}.capacityReservationIds[{i}]", cr,
                              "not a capacity reservation ID", "use an ID such as cr-0123456789abcdef0")
        if p.capacity_reservation_ids and not p.reserved:
            yield Finding(f"{where}.capacityType", p.capacity_type,
                          "capacity reservations are listed but capacityType is not reserved",
                          "set capacityType: reserved (On-Demand Capacity Reservations) or capacity-block (Capacity "
                          "Blocks for ML), or remove capacityReservationIds")


# The catalog's types that EC2 sells as Capacity Blocks for ML ("Capacity Blocks are currently available for
# p5.48xlarge, p5e.48xlarge, p5en.48xlarge, p4d.24xlarge, trn1.32xlarge, and trn2.48xlarge instances",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html, Supported instance types and
# Regions). AWS adds types over time: extend this set from that page when the catalog gains one.
CAPACITY_BLOCK_TYPES = frozenset({"p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "trn1.32xlarge",
                                  "trn2.48xlarge"})


@rule("capacity-block")
def capacity_block(c: ClusterConfig) -> Iterator[Finding]:
    """A Capacity Block is a reservation of one instance type in one zone (delivered as a targeted capacity
    reservation in a single Availability Zone: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    capacity-blocks-using.html). So the group has one type, one EC2 sells as blocks. The zone: an EFA group is pinned
    to network.efaAvailabilityZone (rule efa-zone; preflight checks each block is there); a group without EFA is
    pinned by its blocks alone, since Karpenter offers reserved capacity only in the reservation's zone
    (aws/karpenter-provider-aws v1.14.1 pkg/providers/instancetype/offering/reserved_capacity_resolver.go), and
    preflight checks that the VPC has a subnet in each block's zone."""
    for where, p in _node_groups(c):
        if p.capacity_type != "capacity-block":
            continue
        if len(p.instance_types) != 1:
            yield Finding(f"{where}.instanceTypes", p.instance_types,
                          "a Capacity Block holds instances of one type: the other types could never launch",
                          f"keep the block's type only (instanceTypes: [{p.instance_types[0]}]), or split the types "
                          "into partitions with a block each")
        for i, t in enumerate(p.instance_types):
            if t in catalog.CATALOG and t not in CAPACITY_BLOCK_TYPES:
                yield Finding(f"{where}.instanceTypes[{i}]", t, "EC2 sells no Capacity Blocks of this type",
                              f"use one of {', '.join(sorted(CAPACITY_BLOCK_TYPES))}, or capacityType on-demand "
                              "or reserved")


@rule("default-partition")
def default_partition(c: ClusterConfig) -> Iterator[Finding]:
    marked = [name for name, p in c.partitions.items() if p.default]
    if len(marked) > 1:
        yield Finding("partitions", marked, "more than one partition has default: true",
                      "mark exactly one partition default: true")
    if not marked and len(c.partitions) > 1:
        yield Finding("partitions", list(c.partitions), "no partition has default: true",
                      "mark the partition that sbatch uses without -p as default: true")


# --- Kubernetes pools (kubernetesPools) ------------------------------------------------------------------

@rule("pool-name")
def pool_name(c: ClusterConfig) -> Iterator[Finding]:
    """A pool's NodePool, EC2NodeClass and placement group are named like a partition's: a shared name would
    make one group's Karpenter objects overwrite the other's."""
    for name in c.kubernetes_pools:
        if not K8S_NAME.match(name) or len(name) > MAX_PARTITION_NAME:
            yield Finding(f"kubernetesPools.{name}", name, "pool names become Kubernetes object and label values",
                          f"use lowercase letters, digits and '-' (at most {MAX_PARTITION_NAME}), "
                          "starting and ending with a letter or digit, e.g. ml-h100")
        if name in c.partitions:
            yield Finding(f"kubernetesPools.{name}", name, f"partition {name} has the same name: both would be "
                          f"the NodePool and EC2NodeClass {name}", "rename the pool, e.g. k8s-" + name)


@rule("pool-min-nodes")
def pool_min_nodes(c: ClusterConfig) -> Iterator[Finding]:
    for name, pool in c.kubernetes_pools.items():
        if pool.min_nodes:
            yield Finding(f"kubernetesPools.{name}.minNodes", pool.min_nodes,
                          "Karpenter launches a pool's node only for a pending pod that needs it: no node is kept "
                          "warm, so this would be silently ignored", "remove minNodes (0)")


# --- JupyterHub (addons.jupyterhub) ----------------------------------------------------------------------

@rule("jupyterhub-profiles")
def jupyterhub_profiles(c: ClusterConfig) -> Iterator[Finding]:
    """Each notebook profile runs on a Kubernetes pool whose nodes have the devices it asks for."""
    hub = c.addons.jupyterhub
    for slug, profile in (hub.profiles.items() if hub else ()):
        where = f"addons.jupyterhub.profiles.{slug}"
        pool = c.kubernetes_pools.get(profile.pool)
        if pool is None:
            yield Finding(f"{where}.pool", profile.pool, "not a Kubernetes pool: notebooks never run on Slurm's "
                          "partitions", f"use one of kubernetesPools ({', '.join(c.kubernetes_pools) or 'none'})")
            continue
        types = _known_types(pool)
        if not types:
            continue  # instance-type-known reports it
        node = types[0]
        if node.accelerator == "none" or profile.devices > node.accelerators:
            have = f"{node.accelerators} {node.accelerator_model}" if node.accelerators else "no accelerator"
            yield Finding(f"{where}.devices", profile.devices, f"pool {profile.pool}'s {node.name} has {have} "
                          "per node: the notebook would never be scheduled",
                          f"ask for 1 to {node.accelerators} devices, or pick a pool with more"
                          if node.accelerators else "pick a GPU or Trainium pool")
    if hub and sum(p.default for p in hub.profiles.values()) > 1:
        yield Finding("addons.jupyterhub.profiles", [s for s, p in hub.profiles.items() if p.default],
                      "more than one profile is the default", "mark one profile `default: true`")


@rule("jupyterhub-auth")
def jupyterhub_auth(c: ClusterConfig) -> Iterator[Finding]:
    """The hub authenticates against the stack's identity source: the directory (LDAP), or an OIDC provider
    for declared people, who have no passwords."""
    hub = c.addons.jupyterhub
    if hub is None:
        return
    mode = c.slurm.identity.mode
    if mode != "ldap" and hub.oidc is None:
        who = "declared users" if mode == "users" else "no people"
        yield Finding("addons.jupyterhub.oidc", None, f"slurm.identity has {who} and no passwords: nobody could "
                      "sign in to the hub",
                      "add addons.jupyterhub.oidc (your identity provider), whose usernames are the Slurm names")
    if mode == "ldap" and hub.oidc is not None:
        yield Finding("addons.jupyterhub.oidc", "set", "slurm.identity.ldap is the identity source: the hub binds "
                      "to it", "remove addons.jupyterhub.oidc")
    ldap = c.slurm.identity.ldap
    if mode == "ldap" and ldap and ldap.bind_password and not ldap.bind_password.startswith("k8s:"):
        yield Finding("slurm.identity.ldap.bindPassword", ldap.bind_password, "the hub reads its bind password "
                      "from a Kubernetes Secret only",
                      "use k8s:<secret>/<key> (the Secret in namespace jupyterhub too)")
    if mode == "ldap" and ldap and ldap.allow_groups:
        # sssd admits by group name (simple_allow_groups); ldapauthenticator 2.0.2's allowed_groups takes group DNs,
        # which the stack does not know: the hub would admit every directory user to the GPU pools.
        yield Finding("slurm.identity.ldap.allowGroups", ldap.allow_groups, "Slurm logins are limited to these "
                      "groups, but the hub cannot check group names: every directory user could start a notebook",
                      "leave allowGroups empty, or turn addons.jupyterhub off until the hub can check the groups")


@rule("jupyterhub-exposure")
def jupyterhub_exposure(c: ClusterConfig) -> Iterator[Finding]:
    hub = c.addons.jupyterhub
    for i, cidr in enumerate(hub.exposure.allowed_cidrs if hub else ()):  # CIDRs already (config_base.Cidr)
        net = ipaddress.ip_network(cidr)
        if str(net) in WORLD_CIDRS or net.prefixlen < 8:
            yield Finding(f"addons.jupyterhub.exposure.allowedCidrs[{i}]", cidr, "the hub is never exposed to the "
                          "internet", "list your office or VPN ranges")


@rule("gitops-repo")
def gitops_repo(c: ClusterConfig) -> Iterator[Finding]:
    g = c.gitops
    if g is None:
        return
    if not (HTTPS_URL.match(g.repo_url) or SSH_URL.match(g.repo_url)):
        yield Finding("gitops.repoURL", g.repo_url, "Argo CD clones over HTTPS or SSH only (no http://, file:// "
                      "or local paths)", "https://git.example.com/org/repo.git or git@git.example.com:org/repo.git")
    if g.path.startswith("/") or ".." in g.path.split("/"):
        yield Finding("gitops.path", g.path, "a path inside the repository", "e.g. clusters/prod (no leading "
                      "/ and no ..)")
    if not g.target_revision.strip() or any(ch.isspace() for ch in g.target_revision):
        yield Finding("gitops.targetRevision", g.target_revision, "not a branch, tag or commit", "e.g. main")


@rule("health-active-checks")
def health_active_checks(c: ClusterConfig) -> Iterator[Finding]:
    for name in c.health.active_checks.partitions:
        if name not in c.partitions:
            yield Finding(f"health.activeChecks.partitions.{name}", name, "no such partition",
                          f"use one of {', '.join(c.partitions)}")
    if HEALTH_ACCOUNT in c.slurm.accounts:
        yield Finding(f"slurm.accounts.{HEALTH_ACCOUNT}", HEALTH_ACCOUNT, "the account the active checks' probes "
                      "run under (the stack makes it when it declares accounts)", "name your account differently")
