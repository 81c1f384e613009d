"""Every named validator: the shipped stacks pass it, and a config that breaks it fails with its path."""

from __future__ import annotations

import pytest

from components import catalog
from components.config.problems import ConfigError
from components.config.rules import VALIDATORS, run_validators
from components.config.slinky_releases import SERIES
from components.config.slurm_advisories import ADVISORIES, advisories_for
from components.config.validation import parse_cluster_config
from tests.config.helpers import Mutation, both, drop_at, problems_of_rule, raw_config, set_at
from tests.config.team_cases import TEAM_CASES
from tests.mlflow.cases import MLFLOW_CASES

# rule -> (stack to start from, mutation, expected path, words the message must hold)
CASES: dict[str, list[tuple[str, Mutation, str, str]]] = {
    "region": [("dev", set_at("region", "oregon"), "region", "not an AWS region"),
               ("dev", set_at("region", "us-west-9"), "region", "not a region AWS has")],
    "max-nodes-addresses": [("prod", set_at("partitions.gpu-h100.maxNodes", 100_000_000),
                             "partitions.gpu-h100.maxNodes", "more than the 24561 addresses")],
    "kubernetes-version": [
        ("dev", set_at("kubernetesVersion", "1.28"), "kubernetesVersion", "1.29 and newer"),
        ("dev", set_at("kubernetesVersion", "v1.30"), "kubernetesVersion", "not a Kubernetes minor version"),
    ],
    "kubernetes-version-pinned": [
        ("dev", set_at("kubernetesVersion", "1.34"), "kubernetesVersion", "no pinned EKS add-on versions"),
    ],
    "cluster-name": [("dev", set_at("clusterName", "9lives"), "clusterName", "start with a letter")],
    "admin-role-arn": [("prod", set_at("adminRoleArns", ["platform-admins"]), "adminRoleArns[0]",
                        "not an IAM role ARN")],
    "node-image-release": [
        ("dev", set_at("nodeImage.release", "v20260714"), "nodeImage.release", "not an EKS AL2023 AMI release"),
        ("dev", set_at("nodeImage.release", "1.32.9-20260714"), "nodeImage.release", "an AMI for Kubernetes 1.32"),
    ],
    "login-nodes": [("dev", set_at("loginNodes", {"minSize": 3, "maxSize": 2}), "loginNodes.maxSize",
                     "below loginNodes.minSize")],
    "network-source": [
        ("dev", set_at("network.vpcId", "vpc-0abc"), "network", "both a new VPC"),
        ("dev", drop_at("network.vpcCidr"), "network", "neither vpcCidr nor vpcId"),
        ("dev", both(drop_at("network.vpcCidr"), drop_at("network.availabilityZones"),
                      set_at("network.vpcId", "vpc-0abc"), set_at("network.privateSubnetIds", ["subnet-1"])),
         "network.privateSubnetIds", "at least two availability zones"),
    ],
    "vpc-cidr-size": [("dev", set_at("network.vpcCidr", "10.0.0.0/24"), "network.vpcCidr", "between /16 and /20")],
    "availability-zones": [
        ("dev", set_at("network.availabilityZones", ["us-west-2a"]), "network.availabilityZones", "two or more"),
        ("dev", set_at("network.availabilityZones", ["us-west-2a", "us-east-1b"]), "network.availabilityZones[1]",
         "not a zone of region us-west-2"),
    ],
    "efa-zone": [
        ("prod", drop_at("network.efaAvailabilityZone"), "network.efaAvailabilityZone", "need one zone"),
        ("prod", set_at("network.efaAvailabilityZone", "us-west-2d"), "network.efaAvailabilityZone",
         "not one of network.availabilityZones"),
    ],
    "api-deployer": [
        ("prod", drop_at("network.deployer"), "network.deployer", "nothing says where `pulumi up` runs"),
        ("prod", set_at("network.deployer.via", "vpc"), "network.deployer.via", "cannot exist before"),
        ("prod", set_at("network.deployer.cidrs", ["0.0.0.0/0"]), "network.deployer.cidrs[0]", "not a deployer"),
    ],
    "fsx-capacity": [("prod", set_at("storage.fsx.capacityGiB", 1000), "storage.fsx.capacityGiB",
                      "1200, 2400, or a multiple of 2400")],
    "fsx-throughput": [
        ("prod", set_at("storage.fsx.throughputPerTiB", 200), "storage.fsx.throughputPerTiB", "125, 250, 500, 1000"),
        ("dev", set_at("storage.fsx.throughputPerTiB", 250), "storage.fsx.throughputPerTiB", "fixed throughput"),
    ],
    "fsx-backups": [
        ("prod", set_at("storage.fsx.automaticBackupRetentionDays", 0), "storage.fsx.automaticBackupRetentionDays",
         "without automatic backups"),
        ("dev", set_at("storage.fsx.automaticBackupRetentionDays", 7), "storage.fsx.automaticBackupRetentionDays",
         "take no backups"),
    ],
    "fsx-export-deletes": [
        ("prod", set_at("storage.fsx.repositories.1.export", ["NEW", "CHANGED", "DELETED"]),
         "storage.fsx.repositories[1].export", "S3 would lose the only other copy"),
    ],
    "flow-log-retention": [
        ("prod", set_at("network.flowLogRetentionDays", 100), "network.flowLogRetentionDays",
         "CloudWatch Logs does not accept"),
    ],
    "efs-throughput": [
        ("prod", set_at("storage.efs.throughputMode", "provisioned"), "storage.efs.provisionedThroughputMibps",
         "needs the rate"),
        ("prod", set_at("storage.efs.provisionedThroughputMibps", 256), "storage.efs.provisionedThroughputMibps",
         "takes no provisioned rate"),
    ],
    "efs-performance-mode": [("prod", set_at("storage.efs.performanceMode", "maxIO"), "storage.efs.performanceMode",
                              "higher per-operation latency")],
    "efs-gid-range": [("prod", set_at("storage.efs.gidRangeEnd", 50000), "storage.efs.gidRangeEnd",
                       "range is empty"),
                      ("prod", set_at("storage.efs.modelOwnerId", 55000), "storage.efs.modelOwnerId",
                       "inside the efs-ap GID range"),
                      ("prod", set_at("storage.efs.basePath", "/models/dynamic"), "storage.efs.basePath",
                       "inside the models' directory")],
    "fsx-repositories": [
        ("dev", set_at("storage.fsx.repositories", [{"path": "/data", "s3": "s3://b/p", "import": ["NEW"]}]),
         "storage.fsx.repositories", "PERSISTENT_2"),
        ("prod", set_at("storage.fsx.repositories.1.path", "/data/ckpt"), "storage.fsx.repositories[1].path",
         "overlaps the repository at /data"),
        ("prod", set_at("storage.fsx.repositories.0.s3", "ml-data/training"), "storage.fsx.repositories[0].s3",
         "not an S3 URI"),
        ("prod", set_at("storage.fsx.repositories.0.import", []), "storage.fsx.repositories[0]", "never sync"),
    ],
    "login-ssh-keys": [
        ("dev", set_at("slurm.login.rootSshKeys", ["-----BEGIN OPENSSH PRIVATE KEY----- abc"]),
         "slurm.login.rootSshKeys[0]", "PRIVATE key"),
        ("dev", set_at("slurm.login.rootSshKeys", ["hello"]), "slurm.login.rootSshKeys[0]",
         "not an OpenSSH public key"),
    ],
    "login-no-keys": [("dev", both(drop_at("slurm.identity"), drop_at("slurm.accounts")), "slurm.identity",
                       "nobody can log in")],
    "slurm-version": [
        ("dev", set_at("slurm.version", "24.11"), "slurm.version", "25.11 and newer"),
        ("dev", set_at("slurm.version", "latest"), "slurm.version", "25.11 and newer"),
        ("dev", set_at("slurm.version", "25.05.3"), "slurm.version", "25.11 and newer"),
        ("prod", set_at("slurm.version", "26.11"), "slurm.version", "no images for Slurm 26.11"),
    ],
    # SchedMD's 2026-09 advisory: every release before 25.11.8 (and 26.05.4) is affected.
    "slurm-advisories": [
        ("dev", set_at("slurm.version", "25.11.7"), "slurm.version",
         "Slurm 25.11.7 is affected by CVE-2026-65107, CVE-2026-65108"),
        ("prod", set_at("slurm.version", "25.11.6"), "slurm.version", "fixed in 25.05.9, 25.11.8, 26.05.4"),
        ("dev", set_at("slurm.version", "26.05.3"), "slurm.version", "Slurm 26.05.3 is affected"),
        ("prod", set_at("slurm.images.slurmd", "ghcr.io/slinkyproject/slurmd-pyxis:25.11.6-ubuntu24.04"),
         "slurm.images.slurmd", "Slurm 25.11.6 is affected by CVE-2026-65107"),
    ],
    "agent-image-digest": [
        ("dev", set_at("slurm.images.agent", "ghcr.io/acme/slurm-eks-agent:1.0"), "slurm.images.agent",
         "pinned by digest"),
        ("prod", set_at("slurm.images.agent", "ghcr.io/acme/slurm-eks-agent@sha256:abc"), "slurm.images.agent",
         "pinned by digest"),
    ],
    "partition-name": [("dev", lambda c: c["partitions"].update(GPU_Big=c["partitions"].pop("gpu")),
                        "partitions.GPU_Big", "Kubernetes object names")],
    "instance-type-known": [("prod", set_at("partitions.gpu-h100.instanceTypes", ["p5.48xlarg"]),
                             "partitions.gpu-h100.instanceTypes[0]", "not in the instance catalog")],
    "partition-accelerators": [("prod", set_at("partitions.gpu-a100.instanceTypes", ["p4d.24xlarge", "trn1.32xlarge"]),
                                "partitions.gpu-a100.instanceTypes", "mixes accelerators")],
    "efa-supported": [("dev", set_at("partitions.gpu.instanceTypes", ["g5.xlarge"]),
                       "partitions.gpu.efa", "has no EFA interface")],
    "efa-interface-count": [("prod", set_at("partitions.gpu-h100.instanceTypes", ["p5e.48xlarge", "p5en.48xlarge"]),
                             "partitions.gpu-h100.instanceTypes", "EFA interface counts differ")],
    "efa-capacity-type": [("prod", set_at("partitions.gpu-h100.capacityType", "spot"),
                           "partitions.gpu-h100.capacityType", "spot node is reclaimed")],
    "node-counts": [
        ("dev", set_at("partitions.gpu.minNodes", 5), "partitions.gpu.minNodes", "larger than maxNodes"),
        ("dev", set_at("partitions.gpu.maxNodes", 0), "partitions.gpu.maxNodes", "never have a node"),
    ],
    "capacity-reservations": [
        ("prod", set_at("partitions.gpu-h100.capacityType", "reserved"), "partitions.gpu-h100.capacityReservationIds",
         "needs the capacity reservations"),
        ("prod", set_at("partitions.gpu-h100.capacityReservationIds", ["cr-0123456789abcdef0"]),
         "partitions.gpu-h100.capacityType", "not reserved"),
        ("prod", set_at("partitions.gpu-h100.capacityType", "capacity-block"),
         "partitions.gpu-h100.capacityReservationIds", "needs the capacity reservations of its blocks"),
    ],
    "capacity-block": [
        ("prod", both(set_at("partitions.gpu-h100.capacityType", "capacity-block"),
                      set_at("partitions.gpu-h100.capacityReservationIds", ["cr-0123456789abcdef0"]),
                      set_at("partitions.gpu-h100.instanceTypes", ["p5.48xlarge", "p5e.48xlarge"])),
         "partitions.gpu-h100.instanceTypes", "instances of one type"),
        ("prod", both(set_at("partitions.gpu-a100.capacityType", "capacity-block"),
                      set_at("partitions.gpu-a100.capacityReservationIds", ["cr-0123456789abcdef0"]),
                      set_at("partitions.gpu-a100.instanceTypes", ["p4de.24xlarge"])),
         "partitions.gpu-a100.instanceTypes[0]", "no Capacity Blocks of this type"),
    ],
    "default-partition": [
        ("prod", set_at("partitions.gpu-a100.default", True), "partitions", "more than one partition"),
        ("prod", set_at("partitions.gpu-h100.default", False), "partitions", "no partition has default"),
    ],
}
# The efa-supported case needs efa switched on for the dev partition.
CASES["efa-supported"][0] = ("dev", both(set_at("partitions.gpu.instanceTypes", ["g5.xlarge"]),
                                          set_at("partitions.gpu.efa", True),
                                          set_at("network.efaAvailabilityZone", "us-west-2a")),
                             "partitions.gpu.efa", "has no EFA interface")


# Kubernetes pools: their own rules, and the partitions' node rules reported at the pool's path.
POOL = "kubernetesPools.ml-h100"
CASES["pool-name"] = [
    ("prod", lambda c: c["kubernetesPools"].update({"gpu-a100": c["kubernetesPools"].pop("ml-h100")}),
     "kubernetesPools.gpu-a100", "partition gpu-a100 has the same name"),
    ("prod", lambda c: c["kubernetesPools"].update(ML_Pool=c["kubernetesPools"].pop("ml-h100")),
     "kubernetesPools.ML_Pool", "Kubernetes object and label values"),
]
CASES["checkpoint-store"] = [
    ("prod", set_at("storage.checkpointStore.s3", "ml-data/store"), "storage.checkpointStore.s3", "not an S3 URI"),
    ("prod", set_at("storage.checkpointStore.s3", "s3://ml-data/checkpoints/store"), "storage.checkpointStore.s3",
     "overlaps storage.fsx.repositories[1]"),
    ("prod", set_at("storage.checkpointStore.s3", "s3://ml-data/mlflow/store"), "storage.checkpointStore.s3",
     "overlaps addons.mlflow.artifacts"),
]
CASES["pool-min-nodes"] = [("prod", set_at(f"{POOL}.minNodes", 1), f"{POOL}.minNodes", "would be silently ignored")]
CASES["instance-type-known"].append(("prod", set_at(f"{POOL}.instanceTypes", ["p5.48xlarg"]),
                                     f"{POOL}.instanceTypes[0]", "not in the instance catalog"))
CASES["partition-accelerators"].append(("prod", set_at(f"{POOL}.instanceTypes", ["p5.48xlarge", "trn1.32xlarge"]),
                                        f"{POOL}.instanceTypes", "mixes accelerators"))
CASES["efa-supported"].append(("prod", set_at(f"{POOL}.instanceTypes", ["g5.xlarge"]), f"{POOL}.efa",
                               "has no EFA interface"))
CASES["efa-interface-count"].append(("prod", set_at(f"{POOL}.instanceTypes", ["p5e.48xlarge", "p5en.48xlarge"]),
                                     f"{POOL}.instanceTypes", "EFA interface counts differ"))
CASES["efa-capacity-type"].append(("prod", set_at(f"{POOL}.capacityType", "spot"), f"{POOL}.capacityType",
                                   "spot node is reclaimed"))
CASES["node-counts"].append(("prod", set_at(f"{POOL}.maxNodes", 0), f"{POOL}.maxNodes", "never have a node"))
CASES["capacity-reservations"].append(("prod", set_at(f"{POOL}.capacityType", "reserved"),
                                       f"{POOL}.capacityReservationIds", "needs the capacity reservations"))
# An EFA pool needs the EFA zone even where no partition has efa.
CASES["efa-zone"].append(("prod", both(drop_at("network.efaAvailabilityZone"),
                                       *(set_at(f"partitions.{p}.efa", False) for p in ("gpu-h100", "gpu-a100",
                                                                                         "trainium"))),
                          "network.efaAvailabilityZone", "kubernetesPools.ml-h100"))

CASES.update(TEAM_CASES)
# JupyterHub (tests/jupyterhub has the hub's config itself).
HUB = "addons.jupyterhub"
CASES["jupyterhub-profiles"] = [
    ("prod", set_at(f"{HUB}.profiles.gpu-8.pool", "gpu-h100"), f"{HUB}.profiles.gpu-8.pool",
     "not a Kubernetes pool"),
    ("prod", set_at(f"{HUB}.profiles.gpu-1.devices", 2), f"{HUB}.profiles.gpu-1.devices", "has 1 A10G per node"),
    ("prod", set_at(f"{HUB}.profiles.trainium-16.devices", 32), f"{HUB}.profiles.trainium-16.devices",
     "has 16 Trainium per node"),
    ("prod", set_at(f"{HUB}.profiles.gpu-8.default", True), f"{HUB}.profiles", "more than one profile"),
]
DIRECTORY = {"uri": "ldaps://ldap.example.org", "baseDN": "dc=example,dc=org"}
CASES["jupyterhub-auth"] = [
    ("prod", drop_at(f"{HUB}.oidc"), f"{HUB}.oidc", "nobody could sign in"),
    ("prod", both(drop_at(f"{HUB}.oidc"), drop_at("slurm.accounts"),
                  set_at("slurm.identity", {"ldap": {**DIRECTORY, "allowGroups": ["ml-researchers"]}})),
     "slurm.identity.ldap.groupSearchBase", "hub checks groups by DN"),
    ("prod", both(drop_at(f"{HUB}.oidc"), drop_at("slurm.accounts"), set_at("slurm.identity", {"ldap": {
        **DIRECTORY, "caCertificate": "arn:aws:secretsmanager:us-west-2:123456789012:secret:ldap-ca"}})),
     "slurm.identity.ldap.caCertificate", "reads from a Kubernetes Secret only")]
CASES["jupyterhub-identity"] = [
    ("prod", set_at(f"{HUB}.oidc.usernameClaim", "preferred_username"), f"{HUB}.oidc.usernameClaim",
     "a claim people can change"),
    ("prod", set_at(f"{HUB}.oidc.users", {}), f"{HUB}.oidc.users", "nobody could sign in"),
    ("prod", set_at(f"{HUB}.oidc.users.00u1mallory", "mallory"), f"{HUB}.oidc.users.00u1mallory",
     "not a person slurm.identity.users declares"),
    ("prod", set_at(f"{HUB}.oidc.users.00u1second", "alice"), f"{HUB}.oidc.users", "one person mapped from two"),
]
CASES["jupyterhub-exposure"] = [
    ("prod", set_at(f"{HUB}.exposure.allowedCidrs", ["0.0.0.0/0"]), f"{HUB}.exposure.allowedCidrs[0]",
     "never exposed to the internet"),
    ("prod", drop_at(f"{HUB}.exposure.tls"), f"{HUB}.exposure.tls", "in plain HTTP"),
    ("prod", set_at(f"{HUB}.exposure.tls.secret", "hub-tls"), f"{HUB}.exposure.tls", "exactly one of them"),
]
CASES.update(MLFLOW_CASES)  # addons.mlflow (tests/mlflow has the server's plan, policies and IAM)
CASES["gitops-repo"] = [  # more cases: tests/gitops/test_gitops.py
    ("prod", set_at("gitops", {"repoURL": "http://git.example.com/x.git"}), "gitops.repoURL", "HTTPS or SSH"),
    ("prod", set_at("gitops", {"repoURL": "git@git.example.com:o/r.git", "path": "/abs"}), "gitops.path",
     "inside the repository")]

CASES["health-active-checks"] = [
    ("prod", set_at("health", {"activeChecks": {"partitions": {"gpu-h10": {}}}}),
     "health.activeChecks.partitions.gpu-h10", "no such partition"),
    ("prod", set_at("slurm.accounts.slurm-eks-health", {"users": ["alice"]}), "slurm.accounts.slurm-eks-health",
     "active checks' probes")]


# Rules that read the stack around the config (its siblings): their cases need a stacks directory.
TESTED_ELSEWHERE = {"storage-prefixes-shared": "tests/config/test_storage_prefixes.py"}


def test_every_validator_has_cases() -> None:
    assert set(CASES) | set(TESTED_ELSEWHERE) == set(VALIDATORS)


# The only finding of the shipped stacks: trn1 has 8 EFA interfaces, trn1n 16.
SHIPPED_WARNINGS = {"prod": [("efa-interface-count", "partitions.trainium.instanceTypes")]}


@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.parametrize("rule", sorted(VALIDATORS))
def test_shipped_stacks_pass(rule: str, stack: str) -> None:
    config, _ = parse_cluster_config(raw_config(stack))
    found = [(p.rule, p.path) for p in run_validators(config) if p.rule == rule]
    assert found == [w for w in SHIPPED_WARNINGS.get(stack, []) if w[0] == rule]


@pytest.mark.parametrize(
    ("rule", "stack", "mutate", "path", "words"),
    [(rule, *case) for rule, cases in CASES.items() for case in cases],
    ids=[f"{rule}-{i}" for rule, cases in CASES.items() for i in range(len(cases))],
)
def test_broken_config_is_reported(rule: str, stack: str, mutate: Mutation, path: str, words: str) -> None:
    raw = raw_config(stack)
    mutate(raw)
    severity, _ = VALIDATORS[rule]
    if severity == "error":
        with pytest.raises(ConfigError) as caught:
            parse_cluster_config(raw, "test.yaml")
        problems = caught.value.findings
    else:
        _, problems = parse_cluster_config(raw, "test.yaml")
    found = [p for p in problems if p.rule == rule]
    assert found, f"{rule} did not fire; got {problems}"
    assert any(p.path == path and words in p.message and p.fix for p in found), found


@pytest.mark.parametrize("version", ["25.11", "25.11.8", "26.05", "26.05.4"])
def test_a_series_or_a_patched_release_is_a_valid_slurm_version(version: str) -> None:
    raw = raw_config("dev")
    raw["slurm"]["version"] = version
    _, problems = parse_cluster_config(raw)
    assert [p for p in problems if p.rule in ("slurm-version", "slurm-advisories")] == []


@pytest.mark.parametrize(("release", "affected"), [
    ("25.11.7", True), ("25.11.8", False), ("25.11.10", False), ("25.05.8", True), ("25.05.9", False),
    ("24.11.6", True),  # a series older than every one the advisory lists: SchedMD fixed none of it
    ("26.05.3", True), ("26.05.4", False), ("26.11.0", False),
])
def test_an_advisory_affects_the_releases_before_its_fix(release: str, affected: bool) -> None:
    (advisory,) = ADVISORIES
    assert advisory.affects(release) is affected


def test_every_series_pins_a_release_no_advisory_affects() -> None:
    """The pin `slurm.version: "25.11"` stands for: a stack on the default is never refused."""
    assert {name: advisories_for(series.patch) for name, series in SERIES.items()} == {name: [] for name in SERIES}


KNOWN_TYPES = ", ".join(catalog.CATALOG)


@pytest.mark.parametrize(("typo", "hint"), [
    ("p5.48xlarg", "did you mean p5.48xlarge or p5e.48xlarge or p5en.48xlarge? "),
    ("t3.micro", ""),  # nothing in the catalog is close
])
def test_an_unknown_instance_type_suggests_the_close_ones_only(typo: str, hint: str) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"]["instanceTypes"] = [typo]
    assert [(p.path, p.fix) for p in problems_of_rule(raw, "instance-type-known")] == [
        ("partitions.gpu-h100.instanceTypes[0]", f"{hint}known: {KNOWN_TYPES}")]


def test_a_partition_of_unknown_types_is_not_said_to_mix_accelerators() -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"]["instanceTypes"] = ["p6-b200.48xlarge"]
    assert problems_of_rule(raw, "partition-accelerators") == []
    assert [p.path for p in problems_of_rule(raw, "instance-type-known")] == ["partitions.gpu-h100.instanceTypes[0]"]


def test_mixed_efa_interface_counts_request_the_smallest() -> None:
    _, problems = parse_cluster_config(raw_config("prod"))
    assert [(p.path, p.message) for p in problems if p.rule == "efa-interface-count"] == [
        ("partitions.trainium.instanceTypes", "EFA interface counts differ ([8, 16]); each node requests 8")]


@pytest.mark.parametrize("capacity_type", ["on-demand", "spot"])
def test_capacity_reservations_without_capacity_type_reserved_are_refused(capacity_type: str) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType=capacity_type, efa=False,
                                         capacityReservationIds=["cr-0123456789abcdef0"])
    assert [(p.path, p.value, p.message) for p in problems_of_rule(raw, "capacity-reservations")] == [
        ("partitions.gpu-h100.capacityType", capacity_type,
         "capacity reservations are listed but capacityType is not reserved")]


def test_reserved_capacity_with_its_reservations_is_accepted() -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="reserved", capacityReservationIds=["cr-0123456789abcdef0"])
    assert problems_of_rule(raw, "capacity-reservations") == []


def _capacity_block(raw: dict, partition: str = "gpu-h100") -> dict:
    raw["partitions"][partition].update(capacityType="capacity-block", capacityReservationIds=["cr-0123456789abcdef0"])
    return raw


def test_a_capacity_block_partition_passes_every_rule() -> None:
    config, problems = parse_cluster_config(_capacity_block(raw_config("prod")))
    assert [(p.rule, p.path) for p in problems] == SHIPPED_WARNINGS["prod"]
    assert config.partitions["gpu-h100"].reserved


def test_a_capacity_block_partition_without_efa_needs_no_zone() -> None:
    """Karpenter launches into a block only in its zone; preflight checks the VPC reaches it."""
    raw = _capacity_block(raw_config("dev"), "gpu")
    raw["partitions"]["gpu"]["instanceTypes"] = ["p5.48xlarge"]
    _, problems = parse_cluster_config(raw)
    assert problems == []


def test_an_efa_capacity_block_partition_is_pinned_to_the_efa_zone() -> None:
    raw = _capacity_block(raw_config("prod"))
    raw["network"].pop("efaAvailabilityZone")
    for name in ("gpu-a100", "trainium"):
        raw["partitions"][name]["efa"] = False
    raw["kubernetesPools"]["ml-h100"]["efa"] = False
    [problem] = problems_of_rule(raw, "efa-zone")
    assert (problem.path, problem.value) == ("network.efaAvailabilityZone", None)
    assert "partitions.gpu-h100" in problem.message and "efaAvailabilityZone" in problem.fix


def test_a_single_partition_is_the_default_without_saying_so() -> None:
    raw = raw_config("dev")
    assert list(raw["partitions"]) == ["gpu"]
    raw["partitions"]["gpu"]["default"] = False
    assert problems_of_rule(raw, "default-partition") == []


def test_two_partitions_need_one_marked_default() -> None:
    raw = raw_config("prod")
    del raw["partitions"]["trainium"]
    raw["partitions"]["gpu-h100"]["default"] = False
    assert [(p.path, p.value, p.message) for p in problems_of_rule(raw, "default-partition")] == [
        ("partitions", ["gpu-h100", "gpu-a100"], "no partition has default: true")]


def test_efa_on_instance_types_without_it_is_reported_on_the_efa_flag() -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-a100"]["instanceTypes"] = ["g5.xlarge"]
    assert [(p.path, p.value, p.message) for p in problems_of_rule(raw, "efa-supported")] == [
        ("partitions.gpu-a100.efa", True, "g5.xlarge has no EFA interface")]
