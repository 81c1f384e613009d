"""Every key of the stack config has an update policy: what changing it does to a running cluster, and whether
`slurm-eks up` may do it without being told (`--force KEY`). A key without a policy is unsupported: a change to
it is refused (fail closed), and tests/config/test_update_policy.py fails until it has one. After AWS
ParallelCluster's per-field update policies (aws-parallelcluster cli/src/pcluster/config/update_policy.py;
config_patch.py treats a field without one as UNSUPPORTED).

The effects below follow the mechanisms the plan builds: slurm.conf changes reach slurmctld by the operator's
in-place `scontrol reconfigure` (CRD v1.2.1 Controller spec.inplaceReconfigure), NodeSets update OnDelete,
Karpenter replaces drifted nodes inside the node image's maintenance window (components/compute/nodepools.py),
people reach running pods through the identity sidecar (components/slinky/identity.py), and the providers'
replace-triggering properties are in scripts/change/replacements.py. No Pulumi here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from components.config.config_tree import ANY_ITEM, Key, Node, matches, parse, text


class Kind(Enum):
    """A policy's kind: its label, what it does (update, replace, restart, roll, drain), what a running cluster
    loses, and whether `up` refuses it unless named in `--force`. ROLLS_LOGIN, PARTITION_IDLE and IDENTITY are
    refused by their conditions (sessions open, jobs in the partition, an ID changed or reused:
    scripts/change/compare.py and cluster_facts.py), not always."""

    LIVE = ("applies live", "update", "nothing", False)
    GROW_ONLY = ("grow only", "update", "nothing when it grows; a shrink is refused", False)
    MAINTENANCE_WINDOW = ("deferred to the RDS maintenance window", "update",
                          "accounting is unavailable for minutes during the window (`--apply-immediately`: now)",
                          False)
    RESTARTS_CONTROLLER = ("restarts the controller", "restart",
                           "Slurm commands and the REST API pause while slurmctld restarts; jobs keep running",
                           False)
    ROLLS_LOGIN = ("rolls the login pods", "roll", "every ssh session and interactive job on the login pods", False)
    PARTITION_IDLE = ("partition must be idle", "drain", "the partition's running jobs, unless it is idle", False)
    ROLLS_NODES = ("rolls nodes", "roll",
                   "nodes are replaced in the maintenance window; a node running a job is replaced after it", False)
    NEW_CLUSTER = ("needs a new cluster (refused)", "replace", "what the replaced resource holds", True)
    IDENTITY = ("never changes", "update",
                "files keep the old number; a later reuse hands them to someone else", False)
    UNSUPPORTED = ("unsupported (no update policy)", "unknown", "unknown: the key has no update policy", True)

    def __init__(self, label: str, effect: str, loses: str, refused: bool) -> None:
        self.label, self.effect, self.loses, self.refused = label, effect, loses, refused


@dataclass(frozen=True)
class UpdatePolicy:
    """`does`: what the change does here; `fix`: how to make it safely when refused. `shrink`: a member or number
    that goes or falls is judged by that policy instead (partitions.*: added live, removed only when idle)."""

    kind: Kind
    does: str = ""
    fix: str = ""
    shrink: UpdatePolicy | None = None


LIVE, GROW = UpdatePolicy(Kind.LIVE), Kind.GROW_ONLY
_ROLL_NODES = UpdatePolicy(Kind.ROLLS_NODES, "Karpenter replaces the partition's nodes that no longer match "
                           "(drift), inside nodeImage.maintenanceWindow")
_ROLL_LOGIN = UpdatePolicy(Kind.ROLLS_LOGIN, "the login pods' template changes: each is replaced",
                           "do it when nobody is logged in, or announce it; then `up --force KEY`")
_NEW_NETWORK = UpdatePolicy(Kind.NEW_CLUSTER, "replaces the EKS cluster, the FSx file system and the database "
                            "(their subnets and VPC are replace-only)",
                            "create a new stack with the new network (`slurm-eks init NEW --from STACK`), move the "
                            "data, then retire this one")
_PEOPLE_ROLL = UpdatePolicy(Kind.ROLLS_LOGIN, "an existing person's account line changes: the setup on each pod "
                            "adds people but never rewrites them, so the login and controller pods restart to take it",
                            "announce it, then `up --force KEY`")
_DEFERRED = UpdatePolicy(Kind.MAINTENANCE_WINDOW, "RDS applies it in the instance's weekly maintenance window")

POLICIES: dict[str, UpdatePolicy] = {
    "region": _NEW_NETWORK,
    "kubernetesVersion": UpdatePolicy(Kind.ROLLS_NODES, "upgrades the control plane, then the node groups and "
                                      "Karpenter's nodes roll; one minor version at a time, never down",
                                      "step one minor version per `up` (1.33 -> 1.34 -> 1.35)"),
    "clusterName": UpdatePolicy(Kind.NEW_CLUSTER, "the EKS cluster's name is replace-only: a new, empty cluster",
                                "keep clusterName; a new name is a new stack (`slurm-eks init NEW --from STACK`)"),
    "tags": LIVE,
    "adminRoleArns": LIVE,
    "network.vpcCidr": _NEW_NETWORK,
    "network.availabilityZones": _NEW_NETWORK,
    "network.vpcId": _NEW_NETWORK,
    "network.privateSubnetIds": _NEW_NETWORK,
    "network.efaAvailabilityZone": UpdatePolicy(
        Kind.NEW_CLUSTER, "moves the FSx file system's subnet: FSx replaces the file system (/shared, homes "
        "included) and EFA partitions move zone", "keep the zone; a new zone is a new file system: create it in a "
        "new stack, copy /shared, then retire this one"),
    "network.apiPublicCidrs": LIVE,
    "network.deployer": LIVE,
    "network.deployer.via": LIVE,
    "network.deployer.cidrs": LIVE,
    "network.flowLogRetentionDays": LIVE,
    "systemNodes.instanceTypes": UpdatePolicy(Kind.ROLLS_NODES, "replaces the system node group: the operators and "
                                              "Karpenter move to the new nodes"),
    "systemNodes.minSize": LIVE,
    "systemNodes.maxSize": LIVE,
    "loginNodes.instanceTypes": UpdatePolicy(Kind.ROLLS_LOGIN, "replaces the login node group: the login pods move",
                                             "announce it, then `up --force KEY`"),
    "loginNodes.minSize": LIVE,
    "loginNodes.maxSize": LIVE,
    "nodeImage.release": UpdatePolicy(Kind.ROLLS_NODES, "new AMI: node groups roll, Karpenter's nodes drift and are "
                                      "replaced inside the maintenance window"),
    "nodeImage.maintenanceWindow.day": LIVE,
    "nodeImage.maintenanceWindow.startHour": LIVE,
    "nodeImage.maintenanceWindow.hours": LIVE,
    "storage.fsx.deploymentType": UpdatePolicy(
        Kind.NEW_CLUSTER, "FSx replaces a file system whose deployment type changes: /shared, homes included",
        "keep deploymentType; for another type create a new file system (a new stack), copy /shared to it, then "
        "retire this one"),
    "storage.fsx.capacityGiB": UpdatePolicy(GROW, "FSx grows the file system online; it cannot shrink",
                                            "keep the capacity; a smaller one is a new file system"),
    "storage.fsx.throughputPerTiB": LIVE,
    "storage.fsx.repositories[]": UpdatePolicy(Kind.LIVE, "links or unlinks an S3 prefix; files in /shared stay"),
    "storage.fsx.repositories[].path": UpdatePolicy(Kind.LIVE, "replaces the link (a new association); files stay"),
    "storage.fsx.repositories[].s3": UpdatePolicy(Kind.LIVE, "replaces the link (a new association); files stay"),
    "storage.fsx.repositories[].import": LIVE,
    "storage.fsx.repositories[].export": LIVE,
    "storage.fsx.automaticBackupRetentionDays": LIVE,
    "storage.fsx.backupStartTime": LIVE,
    "storage.efs": UpdatePolicy(Kind.LIVE, "adds the model file system", shrink=UpdatePolicy(
        Kind.NEW_CLUSTER, "removing storage.efs would delete the models' file system (it is protected)",
        "keep storage.efs; to retire it, copy the models out, `pulumi state unprotect` it, then remove it")),
    "storage.efs.performanceMode": UpdatePolicy(Kind.NEW_CLUSTER, "EFS replaces a file system whose performance "
                                                "mode changes: every model",
                                                "keep it; a new mode is a new file system"),
    "storage.efs.throughputMode": LIVE,
    "storage.efs.provisionedThroughputMibps": LIVE,
    "storage.efs.claimGiB": UpdatePolicy(GROW, "the models' claim grows; a bound claim never shrinks",
                                         "keep claimGiB"),
    "storage.efs.mountPath": UpdatePolicy(Kind.ROLLS_LOGIN, "the login pods' mounts change; compute pods take it as "
                                          "they are replaced", "announce it, then `up --force KEY`"),
    "storage.efs.directoryPerms": UpdatePolicy(Kind.LIVE, "the StorageClass is replaced: new claims only"),
    "storage.efs.gidRangeStart": UpdatePolicy(Kind.LIVE, "the StorageClass is replaced: new claims only"),
    "storage.efs.gidRangeEnd": UpdatePolicy(Kind.LIVE, "the StorageClass is replaced: new claims only"),
    "storage.efs.basePath": UpdatePolicy(Kind.LIVE, "the StorageClass is replaced: new claims only"),
    "storage.efs.modelOwnerId": UpdatePolicy(Kind.IDENTITY, "the models' access point acts as another owner: files "
                                             "written keep the old one", "keep modelOwnerId"),
    "storage.checkpointStore": UpdatePolicy(Kind.LIVE, "jobs started afterwards copy (or stop copying) checkpoints"),
    "storage.checkpointStore.s3": UpdatePolicy(Kind.LIVE, "new copies go to the new location; earlier ones stay"),
    "storage.checkpointStore.intervalSeconds": LIVE,
    "storage.checkpointStore.keep": LIVE,
    "storage.checkpointStore.compression": LIVE,
    "slurm.version": UpdatePolicy(Kind.RESTARTS_CONTROLLER, "a Slurm upgrade: slurmdbd, then slurmctld, then the "
                                  "login pods and nodes as they are replaced"),
    "slurm.images.slurmctld": UpdatePolicy(Kind.RESTARTS_CONTROLLER),
    "slurm.images.slurmd": UpdatePolicy(Kind.ROLLS_NODES, "NodeSets update OnDelete: each node takes it when "
                                        "replaced"),
    "slurm.images.slurmdbd": UpdatePolicy(Kind.RESTARTS_CONTROLLER, "slurmdbd restarts; slurmctld queues its "
                                          "records meanwhile"),
    "slurm.images.slurmrestd": LIVE,
    "slurm.images.login": _ROLL_LOGIN,
    "slurm.images.agent": LIVE,
    "slurm.accounting.database": UpdatePolicy(Kind.NEW_CLUSTER, "moves accounting to another database: the job "
                                              "history and associations stay behind",
                                              "keep it; a move is a dump and load (`sacctmgr dump`, then load)"),
    "slurm.accounting.instanceClass": _DEFERRED,
    "slurm.accounting.storageGiB": UpdatePolicy(GROW, "RDS grows storage; it cannot shrink", "keep storageGiB"),
    "slurm.accounting.multiAz": _DEFERRED,
    "slurm.login.replicas": UpdatePolicy(Kind.LIVE, "more login pods", shrink=UpdatePolicy(
        Kind.ROLLS_LOGIN, "the removed login pods' sessions end", "announce it, then `up --force KEY`")),
    "slurm.login.allowedCidrs": LIVE,
    "slurm.login.rootSshKeys": _ROLL_LOGIN,
    "slurm.restapi.replicas": LIVE,
    "slurm.restapi.maxTokenLifespan": UpdatePolicy(Kind.LIVE, "slurm.conf: reconfigured in place"),
    "slurm.identity.users.*": UpdatePolicy(Kind.LIVE, "the identity sidecar adds the person to the running login "
                                           "and controller pods; no restart"),
    "slurm.identity.users.*.uid": UpdatePolicy(Kind.IDENTITY, "a person's UID is fixed once deployed",
                                               "keep the UID; a new person gets a UID never used before"),
    "slurm.identity.users.*.groups": _PEOPLE_ROLL,
    "slurm.identity.users.*.sshKeys": UpdatePolicy(Kind.LIVE, "sshd reads the key files at each login; the sidecar "
                                                   "rewrites them"),
    "slurm.identity.users.*.shell": _PEOPLE_ROLL,
    "slurm.identity.groups": UpdatePolicy(Kind.IDENTITY, "a group's GID is fixed once deployed; new groups are added "
                                          "live", "keep each group's GID; a new group gets a GID never used before"),
    "slurm.identity.ldap": _ROLL_LOGIN,
    "slurm.identity.ldap.uri": _ROLL_LOGIN,
    "slurm.identity.ldap.baseDN": _ROLL_LOGIN,
    "slurm.identity.ldap.bindDN": _ROLL_LOGIN,
    "slurm.identity.ldap.bindPassword": _ROLL_LOGIN,
    "slurm.identity.ldap.caCertificate": _ROLL_LOGIN,
    "slurm.identity.ldap.schema": _ROLL_LOGIN,
    "slurm.identity.ldap.allowGroups": _ROLL_LOGIN,
    "slurm.identity.ldap.groupSearchBase": _ROLL_LOGIN,
    "slurm.identity.homeBase": UpdatePolicy(Kind.NEW_CLUSTER, "every home moves: files stay at the old place",
                                            "keep homeBase"),
    **{f"slurm.accounts.*{k}": UpdatePolicy(Kind.LIVE, "sacctmgr reconciles it after `up`") for k in (
        "", ".parent", ".description", ".organization", ".users", ".fairshare", ".qos", ".defaultQOS", ".grpTRES")},
    **{f"slurm.qos.*{k}": UpdatePolicy(Kind.LIVE, "sacctmgr reconciles it after `up`") for k in (
        "", ".description", ".priority", ".grpTRES", ".maxTRESPerUser", ".maxTRESPerJob", ".maxJobsPerUser",
        ".maxSubmitJobsPerUser", ".maxWall")},
    **{f"slurm.priority.{k}": UpdatePolicy(Kind.LIVE, "slurm.conf: reconfigured in place") for k in (
        "weights.age", "weights.fairshare", "weights.jobSize", "weights.partition", "weights.qos", "decayHalfLife",
        "maxAge")},
    "partitions.*": UpdatePolicy(Kind.LIVE, "a new NodeSet and partition (slurm.conf reconfigured in place)",
                                 shrink=UpdatePolicy(
        Kind.PARTITION_IDLE, "its NodeSet is deleted: slurm-operator v1.2.1 skips the drain for a NodeSet being "
        "deleted and its pods go by garbage collection, killing running jobs",
        "drain it (`scontrol update PartitionName=NAME State=DRAIN`), wait until its jobs end, then `up` again")),
    **{f"partitions.*.{k}": _ROLL_NODES for k in ("instanceTypes", "efa", "capacityType", "capacityReservationIds")},
    **{f"partitions.*.{k}": UpdatePolicy(Kind.LIVE, "slurm.conf or the autoscaler: no node is replaced") for k in (
        "minNodes", "maxNodes", "idleTimeout", "default", "maxTime", "accounts")},
    "partitions.*.image": UpdatePolicy(Kind.LIVE, "new job steps run in the new image"),
    "partitions.*.checkpointStore": LIVE,
    "partitions.*.checkpointStore.intervalSeconds": LIVE,
    "partitions.*.checkpointStore.keep": LIVE,
    "kubernetesPools.*": UpdatePolicy(Kind.LIVE, "a new NodePool", shrink=UpdatePolicy(
        Kind.ROLLS_NODES, "its NodePool is deleted: Karpenter drains and removes its nodes")),
    **{f"kubernetesPools.*.{k}": _ROLL_NODES for k in ("instanceTypes", "efa", "capacityType",
                                                       "capacityReservationIds")},
    **{f"kubernetesPools.*.{k}": LIVE for k in ("minNodes", "maxNodes", "idleTimeout")},
    "addons.jupyterhub": UpdatePolicy(Kind.LIVE, "installs JupyterHub", shrink=UpdatePolicy(
        Kind.ROLLS_LOGIN, "removes JupyterHub: every running notebook server stops",
        "announce it, then `up --force KEY`")),
    **{f"addons.jupyterhub.{k}": UpdatePolicy(Kind.LIVE, "the hub restarts; running notebook servers stay") for k in (
        "image", "profiles.*", "profiles.*.pool", "profiles.*.devices", "profiles.*.displayName",
        "profiles.*.default", "oidc", "oidc.authorizeUrl", "oidc.tokenUrl", "oidc.userdataUrl", "oidc.clientId",
        "oidc.clientSecret", "oidc.usernameClaim", "oidc.users", "oidc.allowedGroups", "oidc.groupsClaim",
        "oidc.scope", "exposure.type", "exposure.allowedCidrs", "exposure.tls", "exposure.tls.certificateArn",
        "exposure.tls.secret")},
    "addons.mlflow": UpdatePolicy(Kind.LIVE, "installs MLflow", shrink=UpdatePolicy(
        Kind.NEW_CLUSTER, "removes MLflow and its tracking database: every run's record",
        "keep addons.mlflow; export runs first (`mlflow experiments csv`), then `up --force addons.mlflow`")),
    "addons.mlflow.artifacts": UpdatePolicy(Kind.LIVE, "new runs log there; earlier artifacts stay"),
    "addons.mlflow.database": UpdatePolicy(Kind.NEW_CLUSTER, "another tracking database: earlier runs stay behind",
                                           "keep it; a move is a dump and load of the database"),
    "addons.mlflow.pool": LIVE,
    **{f"addons.{k}": UpdatePolicy(Kind.LIVE, "installs or removes the operator (its custom resources go with it)")
       for k in ("kuberay", "mpiOperator", "volcano")},
    "gitops": LIVE,
    "gitops.repoURL": LIVE,
    "gitops.targetRevision": LIVE,
    "gitops.path": LIVE,
    **{f"health.{k}": LIVE for k in (
        "checkInterval", "minFreeDiskMiB", "dcgmDiagLevel", "repair.enabled", "repair.maxReplacementsPerHour",
        "activeChecks.interval", "activeChecks.relativeFloor", "activeChecks.maxNodesPerRound",
        "activeChecks.partitions.*", "activeChecks.partitions.*.enabled",
        "activeChecks.partitions.*.minBusBandwidthGBps", "pendingAlertAfter", "grafanaStorageGiB")},
}

_PARSED = {parse(pattern): policy for pattern, policy in POLICIES.items()}
UNSUPPORTED = UpdatePolicy(Kind.UNSUPPORTED, "no update policy for this key",
                           "give it one in components/config/update_policy.py")


def policy_for(key: Key) -> tuple[Key, UpdatePolicy]:
    """The pattern and policy of a concrete key; a key no pattern matches is UNSUPPORTED (fail closed)."""
    for pattern, policy in _PARSED.items():
        if matches(pattern, key):
            return pattern, policy
    return key, UNSUPPORTED


def missing(model_nodes: list[Node]) -> list[str]:
    """Keys of the model without a policy, and policies for keys the model lacks."""
    patterns = {n.pattern for n in model_nodes}
    unknown = [text(p) for p in _PARSED if p not in patterns]
    return [text(n.pattern) for n in model_nodes if n.pattern not in _PARSED] + [f"{k} (no such key)" for k in unknown]


__all__ = ["ANY_ITEM", "POLICIES", "Kind", "UpdatePolicy", "missing", "policy_for"]
