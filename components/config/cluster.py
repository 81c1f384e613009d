"""The typed stack config (`slurm-eks:cluster` in `stacks/Pulumi.<stack>.yaml`).

Structure and types live here as pydantic models; rules that relate several settings live in
`components.config.rules`. Nothing here imports Pulumi resource types, so the job tooling on the login pod
can read partitions without Pulumi installed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from components.config.addons import Addons
from components.config.base import Cidr, FsxEvent, Model, SlurmTime
from components.config.checkpoint_store import CheckpointStore, CheckpointStoreOverride
from components.config.efs import Efs
from components.config.gitops import GitOps
from components.config.health import Health
from components.config.k8s_pools import KubernetesPool, NodeGroup
from components.config.keys import CONFIG_KEY, CONFIG_NAMESPACE, FULL_KEY  # noqa: F401 (re-exported)
from components.config.teams import Account, Identity, Priority, Qos, SlurmName


class Deployer(Model):
    """Where `pulumi up` runs (laptop, CI runner): it creates Helm releases and Kubernetes objects through
    the EKS API, so it must reach the endpoint. `public`: the public endpoint admits `cidrs`; `vpc`: the
    deployer sits inside the cluster's VPC (or a network routed to it) at `cidrs`, and the private endpoint
    admits them on 443."""

    via: Literal["public", "vpc"]
    cidrs: list[Cidr] = Field(min_length=1)


class Network(Model):
    vpc_cidr: Cidr | None = None
    availability_zones: list[str] = Field(default_factory=list)
    vpc_id: str | None = None
    private_subnet_ids: list[str] = Field(default_factory=list)
    efa_availability_zone: str | None = None
    # CIDRs allowed to reach the EKS API's public endpoint; empty keeps the endpoint private.
    api_public_cidrs: list[Cidr] = Field(default_factory=list)
    deployer: Deployer | None = None
    # Days CloudWatch Logs keeps the VPC flow log (one of the retention values CloudWatch Logs accepts).
    flow_log_retention_days: int = Field(90, ge=1)

    @property
    def creates_vpc(self) -> bool:
        return self.vpc_id is None

    @property
    def public_endpoint_cidrs(self) -> list[str]:
        """Who may use the public endpoint: the listed users plus a deployer that comes that way."""
        via_public = self.deployer.cidrs if self.deployer and self.deployer.via == "public" else []
        return list(dict.fromkeys([*self.api_public_cidrs, *via_public]))


class SystemNodes(Model):
    """The managed node group for controllers (Karpenter, operators, CoreDNS); Karpenter never runs on
    nodes it manages."""

    instance_types: list[str] = Field(default_factory=lambda: ["m7i.xlarge"], min_length=1)
    min_size: int = Field(2, ge=2)
    max_size: int = Field(3, ge=2)


class LoginNodes(Model):
    """The managed node group that only login pods run on (tainted): a shell that escapes its pod lands on a
    node with no controller's credentials."""

    instance_types: list[str] = Field(default_factory=lambda: ["m7i.large"], min_length=1)
    min_size: int = Field(1, ge=1)
    max_size: int = Field(2, ge=1)


class MaintenanceWindow(Model):
    """When Karpenter may replace nodes for a new AMI (drift): weekly, `hours` long from `day` at `startHour`
    UTC (Karpenter budget schedules are UTC)."""

    day: Literal["sun", "mon", "tue", "wed", "thu", "fri", "sat"] = "sun"
    start_hour: int = Field(3, ge=0, le=23)
    hours: int = Field(4, ge=1, le=167)


class NodeImage(Model):
    """The EKS-optimized AL2023 AMI every node runs, pinned: an EKS managed node group release version
    `<kubernetes patch>-<YYYYMMDD>` (awslabs/amazon-eks-ami CHANGELOG.md, "Release version"); Karpenter
    takes the same release as `al2023@v<YYYYMMDD>`. Default: release v20260714, Kubernetes 1.33.13."""

    release: str = "1.33.13-20260714"
    maintenance_window: MaintenanceWindow = Field(default_factory=MaintenanceWindow)

    @property
    def date(self) -> str:
        return self.release.rpartition("-")[2]


class Repository(Model):
    """An S3 prefix linked into FSx at `path` by a data repository association."""

    path: str
    s3: str
    import_events: list[FsxEvent] = Field(default_factory=list, alias="import")
    export_events: list[FsxEvent] = Field(default_factory=list, alias="export")


class Fsx(Model):
    deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = "PERSISTENT_2"
    capacity_gib: int = Field(1200, alias="capacityGiB", gt=0)
    throughput_per_tib: int | None = Field(None, alias="throughputPerTiB", validate_default=True)
    repositories: list[Repository] = Field(default_factory=list)
    # Daily automatic backups kept this many days (PERSISTENT only, default 7; at most 90), taken in the daily
    # window that starts at `backupStartTime` (HH:MM, UTC). SCRATCH file systems take none.
    automatic_backup_retention_days: int | None = Field(None, ge=0, le=90, validate_default=True)
    backup_start_time: str = Field("03:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")

    @field_validator("throughput_per_tib")
    @classmethod
    def _persistent_default(cls, value: int | None, info: ValidationInfo) -> int | None:
        # PERSISTENT_2 needs a throughput and SCRATCH_2 takes none: 125 MB/s/TiB, the cheapest tier, lets a
        # stack leave out `storage` altogether.
        if value is None and info.data.get("deployment_type") == "PERSISTENT_2":
            return 125
        return value

    @field_validator("automatic_backup_retention_days")
    @classmethod
    def _persistent_backups(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is None and info.data.get("deployment_type") == "PERSISTENT_2":
            return 7
        return value


class Storage(Model):
    fsx: Fsx = Field(default_factory=Fsx)
    efs: Efs | None = None  # model storage (components/config/efs.py); off unless set
    # jobs' checkpoints copied to S3 as they complete (components/config/checkpoint_store.py); off unless set
    checkpoint_store: CheckpointStore | None = None


class Accounting(Model):
    database: Literal["rds", "in-cluster"] = "rds"
    # Amazon RDS for MariaDB sizing (database: rds); slurmdbd's load is small.
    instance_class: str = "db.t4g.medium"
    storage_gib: int = Field(50, alias="storageGiB", ge=20)
    multi_az: bool = False


class Login(Model):
    replicas: int = Field(1, ge=0)
    # Source ranges of the login NLB; empty means an internal NLB reachable only inside the VPC.
    allowed_cidrs: list[Cidr] = Field(default_factory=list)
    # root's authorized keys. Empty (the default): root cannot log in; people log in as themselves
    # (`slurm.identity`). Listing keys here is how a stack says it wants root logins.
    root_ssh_keys: list[str] = Field(default_factory=list)
    # SSH from the whole internet (0.0.0.0/0 in allowedCidrs) is the policy pack's to allow (no-world-ssh, with
    # allowPublicLoginSsh in policy/config/<stack>.json), not the stack file's: docs/ci-and-policies.md.


class RestApi(Model):
    replicas: int = Field(1, ge=0)
    # The longest a token from `scontrol token` lives, in seconds (slurm.conf AuthAltParameters max_token_lifespan;
    # unset in Slurm, a person could mint one that never expires). A day: a notebook's token for a working day.
    max_token_lifespan: int = Field(86400, ge=300, le=30 * 86400)


class SlurmImages(Model):
    """Images of the Slurm daemons; each unset one is Slinky's for `slurm.version` (the pyxis variants for
    slurmd and login, so job steps can run in containers)."""

    slurmctld: str | None = None
    slurmd: str | None = None
    slurmdbd: str | None = None
    slurmrestd: str | None = None
    login: str | None = None
    # The slurm-eks agent image (slurm/agent/Dockerfile) by digest, from your own registry; unset: `pulumi up`
    # builds it into the stack's ECR repository (components/slinky/agent_image.py).
    agent: str | None = None


class Slurm(Model):
    # Slinky 1.2.x needs Slurm >= 25.11; pyslurm on the login pod must match it. A series ("25.11") stands for
    # the patch release components/config/slinky_releases.py pins for it; a patch ("25.11.8") is used as written.
    version: str = "25.11"
    images: SlurmImages = Field(default_factory=SlurmImages)
    accounting: Accounting = Field(default_factory=Accounting)
    login: Login = Field(default_factory=Login)
    restapi: RestApi = Field(default_factory=RestApi)
    identity: Identity = Field(default_factory=Identity)
    # The Slurm account tree, QoS and fair-share weights, reconciled with sacctmgr after each `pulumi up`.
    accounts: dict[SlurmName, Account] = Field(default_factory=dict)
    qos: dict[SlurmName, Qos] = Field(default_factory=dict)
    priority: Priority = Field(default_factory=Priority)


class Partition(NodeGroup):
    """A Slurm partition: its nodes (instanceTypes, minNodes, maxNodes, efa, capacityType,
    capacityReservationIds, idleTimeout: components/config/k8s_pools.py NodeGroup) and its Slurm settings."""

    default: bool = False
    max_time: SlurmTime = "UNLIMITED"
    # The container image job steps run in (`srun --container-image`); unset: the default training image
    # for the partition's accelerator (components/slinky/images.py).
    image: str | None = None
    # Slurm accounts (`slurm.accounts`) whose jobs may run here (AllowAccounts=); empty: every account.
    accounts: list[SlurmName] = Field(default_factory=list)
    # The checkpoint manager's interval and count for this partition's jobs (storage.checkpointStore's otherwise).
    checkpoint_store: CheckpointStoreOverride | None = None


class ClusterConfig(Model):
    region: str
    kubernetes_version: str
    cluster_name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    # IAM roles given cluster-admin through EKS access entries (the deployer gets it automatically).
    admin_role_arns: list[str] = Field(default_factory=list)
    network: Network = Field(default_factory=Network)
    system_nodes: SystemNodes = Field(default_factory=SystemNodes)
    login_nodes: LoginNodes = Field(default_factory=LoginNodes)
    node_image: NodeImage = Field(default_factory=NodeImage)
    storage: Storage = Field(default_factory=Storage)
    slurm: Slurm = Field(default_factory=Slurm)
    partitions: dict[str, Partition] = Field(min_length=1)
    kubernetes_pools: dict[str, KubernetesPool] = Field(default_factory=dict)  # nodes Slurm never uses
    addons: Addons = Field(default_factory=Addons)  # the Kubernetes-native side (components/config/addons.py)
    gitops: GitOps | None = None  # Argo CD applies the Kubernetes side (components/config/gitops.py)
    health: Health = Field(default_factory=Health)  # node checks, repair, active checks (components/config/health.py)

    def name_for(self, stack: str) -> str:
        return self.cluster_name or f"slurm-eks-{stack}"

    @property
    def default_partition(self) -> str:
        marked = [name for name, p in self.partitions.items() if p.default]
        return marked[0] if marked else next(iter(self.partitions))

    @property
    def efa_partitions(self) -> dict[str, Partition]:
        return {name: p for name, p in self.partitions.items() if p.efa}
