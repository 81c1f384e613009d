"""The shared file system: FSx for Lustre in the EFA zone, linked to S3, mounted by every Slurm pod at /shared.

Kubernetes sees it as one static PersistentVolume (the FSx CSI driver mounts it) bound to one RWX claim in
the Slurm namespace. The file system is `protect`ed and retained whatever the config says: `pulumi destroy` and
any config change leave it until someone unprotects it on purpose (docs/operating.md, "Shared file system").
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.aws.vpc import Network
from components.config import cluster as cfg
from components.kubernetes.handover import helm_release
from components.names import SHARED_PVC
from components.storage.static_claims import StaticVolume, claim_in

LUSTRE_PORTS = ((988, 988), (1018, 1023))  # LNET, and the privileged ports Lustre clients connect from
LUSTRE_VERSION = "2.15"  # required for PERSISTENT_2 metadata configuration
CSI_DRIVER = "fsx.csi.aws.com"
CSI_CHART = "aws-fsx-csi-driver"
CSI_CHART_REPO = "https://kubernetes-sigs.github.io/aws-fsx-csi-driver"
CSI_CHART_VERSION = "1.17.0"
CSI_NAMESPACE = "kube-system"
CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
MOUNT_OPTIONS = ["flock"]  # cluster-wide POSIX locks: checkpoint writers and SQLite-style tools rely on them


@dataclass(frozen=True)
class SharedStorageArgs:
    fsx: cfg.Fsx
    cluster: EksCluster
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]  # one private subnet: a Lustre file system lives in one zone
    namespace: str  # where the first claim goes (the Slurm namespace); claim_in() adds others
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)  # e.g. that namespace


def fsx_subnet(network: Network, net: cfg.Network) -> pulumi.Output[str]:
    """The private subnet of the EFA zone (else the first zone), so multi-node jobs and their data share a zone."""
    zone = net.efa_availability_zone or next(iter(net.availability_zones), None)
    if zone:
        return network.private_subnet_in(zone)
    return network.private_subnet_ids.apply(lambda ids: ids[0])


def csi_controller_policy(region: str) -> dict[str, Any]:
    """The FSx CSI controller's IAM. The driver documents a policy for dynamic provisioning
    (kubernetes-sigs/aws-fsx-csi-driver docs/install.md at 5b227125, release v1.9.0 = chart 1.17.0): it
    creates, resizes and deletes file systems. Provisioning here is static, so of that policy the controller
    keeps the one read it makes, DescribeFileSystems (ValidateVolumeCapabilities), on `*` because the driver
    also lists every file system (pkg/cloud/cloud.go pollFileSystems), and only in this region."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "DescribeFileSystems", "Effect": "Allow", "Action": "fsx:DescribeFileSystems", "Resource": "*",
        "Condition": {"StringEquals": {"aws:RequestedRegion": region}}}]}


def is_persistent(fsx: cfg.Fsx) -> bool:
    return fsx.deployment_type.startswith("PERSISTENT")


def repository_s3_config(repo: cfg.Repository) -> dict[str, dict[str, list[str]]]:
    """The DRA's `s3` block: which S3 events flow into the file system and which flow back out."""
    s3: dict[str, dict[str, list[str]]] = {}
    if repo.import_events:
        s3["auto_import_policy"] = {"events": list(repo.import_events)}
    if repo.export_events:
        s3["auto_export_policy"] = {"events": list(repo.export_events)}
    return s3


def repository_buckets(fsx: cfg.Fsx) -> tuple[str, ...]:
    """The buckets of the file system's data repositories (what the S3 gateway endpoint must admit)."""
    return tuple(sorted({repo.s3.removeprefix("s3://").split("/", 1)[0] for repo in fsx.repositories}))


def _slug(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "root"


class SharedStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    claim_name: str

    def __init__(self, name: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:SharedStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        sg = self._security_group(name, args, child)
        fs = self._file_system(name, args, sg)
        for repo in args.fsx.repositories:
            aws.fsx.DataRepositoryAssociation(
                f"{name}-dra-{_slug(repo.path)}", file_system_id=fs.id, file_system_path=repo.path,
                data_repository_path=repo.s3, s3=repository_s3_config(repo) or None,
                # List what is already in S3 once, so existing data is visible from the first mount.
                batch_import_meta_data_on_create=bool(repo.import_events),
                tags={"Name": f"{args.cluster.name}{repo.path}"}, opts=child)
        self._name, self._fsx, self._provider = name, args.fsx, args.cluster.provider
        self._driver = self._csi_driver(name, args)
        self.claim_name = SHARED_PVC
        self.file_system_id = fs.id
        self.dns_name = fs.dns_name
        self.mount_name = fs.mount_name
        self.security_group_id = sg.id
        self.claim_in(args.namespace, args.depends_on)
        self.register_outputs({"fileSystemId": fs.id, "dnsName": fs.dns_name, "mountName": fs.mount_name,
                               "securityGroupId": sg.id, "claimName": self.claim_name})

    def _security_group(self, name: str, args: SharedStorageArgs,
                        child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        sg = aws.ec2.SecurityGroup(
            f"{name}-fsx", vpc_id=args.vpc_id, description=f"FSx for Lustre of {args.cluster.name}",
            tags={"Name": f"{args.cluster.name}-fsx"}, opts=child)
        nodes = args.cluster.cluster_security_group_id  # every node, system or Karpenter's, carries it
        for low, high in LUSTRE_PORTS:
            ports = f"{low}" if low == high else f"{low}-{high}"
            # Clients (all nodes) and the file servers themselves, which talk to each other over LNET.
            for source, peer in (("nodes", nodes), ("self", sg.id)):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-fsx-{source}-{ports}", security_group_id=sg.id, referenced_security_group_id=peer,
                    ip_protocol="tcp", from_port=low, to_port=high,
                    description=f"Lustre {ports} from {source}", opts=child)
            # Lustre servers also open connections back to clients (lock callbacks, recovery).
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nodes-from-fsx-{ports}", security_group_id=nodes, referenced_security_group_id=sg.id,
                ip_protocol="tcp", from_port=low, to_port=high, description=f"Lustre {ports} from FSx",
                opts=child)
        # Outbound stays open: the servers reach each other, their clients and, for S3 links, S3.
        aws.vpc.SecurityGroupEgressRule(f"{name}-fsx-egress", security_group_id=sg.id, ip_protocol="-1",
                                        cidr_ipv4="0.0.0.0/0", description="all outbound", opts=child)
        return sg

    def _file_system(self, name: str, args: SharedStorageArgs,
                     sg: aws.ec2.SecurityGroup) -> aws.fsx.LustreFileSystem:
        fsx, persistent = args.fsx, is_persistent(args.fsx)
        # Data is encrypted at rest with the FSx service key (always on; no key of ours to lose) and in
        # transit between Nitro instances and the file servers.
        return aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            deployment_type=fsx.deployment_type,
            storage_type="SSD",
            storage_capacity=fsx.capacity_gib,
            subnet_ids=args.subnet_id,
            security_group_ids=[sg.id],
            file_system_type_version=LUSTRE_VERSION,
            data_compression_type="LZ4",  # training data and checkpoints compress; LZ4 costs no throughput
            per_unit_storage_throughput=fsx.throughput_per_tib if persistent else None,
            metadata_configuration=(aws.fsx.LustreFileSystemMetadataConfigurationArgs(mode="AUTOMATIC")
                                    if fsx.deployment_type == "PERSISTENT_2" else None),
            # Daily backups (FSx API CreateFileSystemLustreConfiguration: AutomaticBackupRetentionDays 0-90,
            # DailyAutomaticBackupStartTime HH:MM UTC; PERSISTENT only, scratch file systems have no backups).
            automatic_backup_retention_days=fsx.automatic_backup_retention_days if persistent else None,
            daily_automatic_backup_start_time=fsx.backup_start_time if persistent else None,
            copy_tags_to_backups=True if persistent else None,
            # A deleted persistent file system leaves a final backup: the provider's default skips it
            # (pulumi-aws 7.51.1 fsx/lustre_file_system.py skip_final_backup "Defaults to `true`"; FSx always skips
            # one for scratch file systems, so it is left unset there).
            skip_final_backup=False if persistent else None,
            final_backup_tags={"slurm-eks:final-backup": args.cluster.name} if persistent else None,
            tags={"Name": f"{args.cluster.name}-shared"},
            # /shared holds every home: protected and retained whatever the config says, so no config change (a
            # deploymentType edit, a new subnet) can delete it in one `pulumi up` (Pulumi replaces a resource
            # whose protect flag the same update clears: pulumi/pulumi pkg/resource/deploy/step_generator.go).
            # `slurm-eks up` refuses such a change before (components/config/update_policy.py).
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True))

    def _csi_driver(self, name: str, args: SharedStorageArgs) -> k8s.helm.v3.Release:
        """The FSx CSI driver from its chart rather than the EKS add-on: its values (which nodes, which
        role) are visible and checked in the plan, and it needs no Pod Identity agent. Static provisioning
        only, so the controller may describe file systems but never create or delete one."""
        child = pulumi.ResourceOptions(parent=self)
        cluster = args.cluster
        role = cluster.irsa_role(f"{name}-csi-controller", CSI_NAMESPACE, CSI_CONTROLLER_SA, child)
        policy = aws.get_region_output().region.apply(lambda region: json.dumps(csi_controller_policy(region)))
        aws.iam.RolePolicy(f"{name}-csi-controller", role=role.id, policy=policy, opts=child)
        return helm_release(  # Argo CD's in gitops mode (components/kubernetes/handover.py)
            f"{name}-csi-driver", name=CSI_CHART, chart=CSI_CHART, version=CSI_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CSI_CHART_REPO), namespace=CSI_NAMESPACE,
            values={
                "controller": {"nodeSelector": SYSTEM_NODE_SELECTOR,
                               "serviceAccount": {"name": CSI_CONTROLLER_SA,
                                                  "annotations": {"eks.amazonaws.com/role-arn": role.arn}}},
                # The node plugin does the mounts: it must run on the tainted GPU and Trainium nodes too.
                "node": {"tolerateAllTaints": True},
            },
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider))

    def claim_in(self, namespace: str, depends_on: Sequence[pulumi.Resource]) -> list[pulumi.Resource]:
        """The `fsx-shared` claim in `namespace` (after `depends_on`, e.g. the namespace) on a static volume of
        the same file system: every namespace's pods see the same /shared. The driver has no NodeStage (aws-fsx-
        csi-driver pkg/driver/node.go nodeCaps is empty at v1.9.0), so volumes sharing a handle mount apart."""
        volume = StaticVolume(
            SHARED_PVC, f"{self._name}-pv", f"{self._name}-pvc", f"{self._fsx.capacity_gib}Gi",
            {"driver": CSI_DRIVER, "volumeHandle": self.file_system_id,
             "volumeAttributes": {"dnsname": self.dns_name, "mountname": self.mount_name}},
            [self._driver], MOUNT_OPTIONS)
        return claim_in(volume, namespace, depends_on, self, self._provider)
