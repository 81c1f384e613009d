"""Model storage: an EFS file system in every private subnet, the EFS CSI driver, the models' access point with a
read-only RWX claim on it in the Slurm namespace (and in any namespace that asks: `claim_in`) that login and
compute pods mount, and an `efs-ap` StorageClass for claims of people's own (storage.efs).

Like FSx, the file system is data that must outlive the stack: encrypted at rest, `protect`ed and
`retain_on_delete` (a `pulumi destroy` stops at it; removing it from the program leaves it in AWS). Only the
nodes reach it, on NFS 2049; the node's kernel does the NFS mount, so pod NetworkPolicies play no part.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.aws.iam import Scope, aws_scope
from components.aws.vpc import Network
from components.config import cluster as cfg
from components.config.efs import MODEL_DIRECTORY, MODEL_PVC, STORAGE_CLASS, Efs
from components.kubernetes.handover import helm_release
from components.storage.static_claims import StaticVolume, claim_in

NFS_PORT = 2049  # docs.aws.amazon.com/efs/latest/ug/network-access.html: mount targets admit NFS on TCP 2049
CSI_DRIVER = "efs.csi.aws.com"
# The driver from its chart, as FSx's is (values visible in the plan, no Pod Identity agent): chart 4.4.1 is
# driver v3.4.1 (kubernetes-sigs/aws-efs-csi-driver charts/aws-efs-csi-driver/Chart.yaml at tag v3.4.1,
# commit 3fcc6bdd); the chart repository is the one docs/install.md names.
CSI_CHART = "aws-efs-csi-driver"
CSI_CHART_REPO = "https://kubernetes-sigs.github.io/aws-efs-csi-driver"
CSI_CHART_VERSION = "4.4.1"
CSI_NAMESPACE = "kube-system"
CSI_CONTROLLER_SA = "efs-csi-controller-sa"  # values.yaml controller.serviceAccount.name at v3.4.1
ACCESS_POINT_TAG = "efs.csi.aws.com/cluster"  # pkg/driver/controller.go DefaultTagKey, value "true"
SERVICE = "elasticfilesystem"  # the IAM service prefix


@dataclass(frozen=True)
class ModelStorageArgs:
    efs: Efs
    cluster: EksCluster
    vpc_id: pulumi.Input[str]
    subnet_ids: Sequence[pulumi.Input[str]]  # one mount target in each private subnet (one per zone)
    namespace: str  # where the first claim goes (the Slurm namespace); claim_in() adds others
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)


def efs_subnets(network: Network, net: cfg.Network) -> list[pulumi.Output[str]] | list[str]:
    """Every private subnet, known before deploy: one per configured zone, or the listed ones."""
    if net.creates_vpc:
        return [network.private_subnet_in(zone) for zone in net.availability_zones]
    return list(net.private_subnet_ids)


def csi_controller_policy(scope: Scope) -> dict[str, Any]:
    """The EFS CSI controller's IAM: kubernetes-sigs/aws-efs-csi-driver docs/iam-policy-example.json at v3.4.1,
    less its `s3files:*` actions (this stack provisions no S3 Files volumes) and ec2:DescribeAvailabilityZones
    (efs-utils' botocore fallback for mounts whose DNS name does not resolve, e.g. from another VPC: docs/faq.md;
    the controller never calls it and the mount targets here are in the nodes' VPC), in this region and account.
    Upstream grants all on `*`; where IAM authorizes by resource type (CreateAccessPoint and DescribeMountTargets
    on the file system, DeleteAccessPoint and TagResource on the access point) the type is named here. Create
    needs the driver's tag on the request; tag and delete only touch access points carrying it."""
    file_systems, access_points = scope.arn(SERVICE, "file-system/*"), scope.arn(SERVICE, "access-point/*")
    here = {"aws:RequestedRegion": scope.region}
    tagged = {f"aws:ResourceTag/{ACCESS_POINT_TAG}": "true"}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Describe", "Effect": "Allow", "Resource": "*",
         "Action": ["elasticfilesystem:DescribeAccessPoints", "elasticfilesystem:DescribeFileSystems"],
         "Condition": {"StringEquals": here}},
        {"Sid": "DescribeMountTargets", "Effect": "Allow", "Resource": file_systems,
         "Action": "elasticfilesystem:DescribeMountTargets"},
        {"Sid": "CreateTaggedAccessPoints", "Effect": "Allow", "Resource": file_systems,
         "Action": "elasticfilesystem:CreateAccessPoint",
         "Condition": {"StringLike": {f"aws:RequestTag/{ACCESS_POINT_TAG}": "true"}}},
        {"Sid": "TagTaggedAccessPoints", "Effect": "Allow", "Resource": access_points,
         "Action": "elasticfilesystem:TagResource", "Condition": {"StringLike": tagged}},
        {"Sid": "DeleteTaggedAccessPoints", "Effect": "Allow", "Resource": access_points,
         "Action": "elasticfilesystem:DeleteAccessPoint", "Condition": {"StringEquals": tagged}},
    ]}


def storage_class_parameters(efs: Efs, file_system_id: pulumi.Input[str]) -> dict[str, pulumi.Input[str]]:
    """The `efs-ap` class's parameters (docs/README.md "Dynamic Provisioning" at v3.4.1): every claim gets its
    own access point under `basePath`, owned by a GID from the range, with `directoryPerms`."""
    return {"provisioningMode": "efs-ap", "fileSystemId": file_system_id, "directoryPerms": efs.directory_perms,
            "gidRangeStart": str(efs.gid_range_start), "gidRangeEnd": str(efs.gid_range_end),
            "basePath": efs.base_path}


class ModelStorage(pulumi.ComponentResource):
    file_system_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    claim_name: str

    def __init__(self, name: str, args: ModelStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:ModelStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        sg = aws.ec2.SecurityGroup(
            f"{name}-efs", vpc_id=args.vpc_id, description=f"EFS model storage of {args.cluster.name}",
            tags={"Name": f"{args.cluster.name}-efs"}, opts=child)
        # Only the nodes (every node carries the EKS cluster group) mount it. No egress rule: NFS replies
        # ride the admitted connection (security groups are stateful) and the servers open none.
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efs-nfs-nodes", security_group_id=sg.id,
            referenced_security_group_id=args.cluster.cluster_security_group_id, ip_protocol="tcp",
            from_port=NFS_PORT, to_port=NFS_PORT, description="NFS from nodes", opts=child)
        efs = args.efs
        fs = aws.efs.FileSystem(
            f"{name}-efs", encrypted=True,  # at rest, with the EFS service key
            performance_mode=efs.performance_mode, throughput_mode=efs.throughput_mode,
            provisioned_throughput_in_mibps=efs.provisioned_throughput_mibps,
            tags={"Name": f"{args.cluster.name}-models"},
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True))
        targets = [aws.efs.MountTarget(f"{name}-efs-{i}", file_system_id=fs.id, subnet_id=subnet,
                                       security_groups=[sg.id], opts=child)
                   for i, subnet in enumerate(args.subnet_ids)]
        driver = self._csi_driver(name, args.cluster)
        self._storage_class(name, args, fs, [driver, *targets])
        self._access_point = self._models_access_point(name, args, fs)
        self._name, self._efs, self._provider = name, efs, args.cluster.provider
        self._ready = [driver, *targets]
        self.file_system_id = fs.id
        self.security_group_id = sg.id
        self.claim_name = MODEL_PVC
        self.claim_in(args.namespace, args.depends_on)
        self.register_outputs({"fileSystemId": fs.id, "securityGroupId": sg.id, "claimName": MODEL_PVC})

    def _models_access_point(self, name: str, args: ModelStorageArgs,
                             fs: aws.efs.FileSystem) -> aws.efs.AccessPoint:
        """The models' directory, created on first use owned by `modelOwnerId` with `directoryPerms`; every
        request through it acts as that user (EFS API CreateAccessPoint: PosixUser, RootDirectory.CreationInfo),
        so readers need no matching UID and nothing else reaches the directory through it."""
        owner = args.efs.model_owner_id
        return aws.efs.AccessPoint(
            f"{name}-models", file_system_id=fs.id,
            posix_user=aws.efs.AccessPointPosixUserArgs(uid=owner, gid=owner),
            root_directory=aws.efs.AccessPointRootDirectoryArgs(
                path=MODEL_DIRECTORY, creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                    owner_uid=owner, owner_gid=owner, permissions=args.efs.directory_perms)),
            tags={"Name": f"{args.cluster.name}-models"}, opts=pulumi.ResourceOptions(parent=self))

    def _csi_driver(self, name: str, cluster: EksCluster) -> k8s.helm.v3.Release:
        child = pulumi.ResourceOptions(parent=self)
        role = cluster.irsa_role(f"{name}-efs-csi-controller", CSI_NAMESPACE, CSI_CONTROLLER_SA, child)
        policy = aws_scope(aws.get_region_output().region).apply(lambda s: json.dumps(csi_controller_policy(s)))
        aws.iam.RolePolicy(f"{name}-efs-csi-controller", role=role.id, policy=policy, opts=child)
        return helm_release(  # Argo CD's in gitops mode (components/kubernetes/handover.py)
            f"{name}-efs-csi-driver", name=CSI_CHART, chart=CSI_CHART, version=CSI_CHART_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=CSI_CHART_REPO), namespace=CSI_NAMESPACE,
            # The node plugin keeps its chart default (tolerations: operator Exists), so it runs on the
            # tainted GPU, Trainium and login nodes too.
            values={"controller": {"nodeSelector": SYSTEM_NODE_SELECTOR,
                                   "serviceAccount": {"name": CSI_CONTROLLER_SA,
                                                      "annotations": {"eks.amazonaws.com/role-arn": role.arn}}}},
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider))

    def _storage_class(self, name: str, args: ModelStorageArgs, fs: aws.efs.FileSystem,
                       ready: Sequence[pulumi.Resource]) -> None:
        """`efs-ap`, for claims of people's own: each gets an access point and directory under `basePath`."""
        k8s.storage.v1.StorageClass(
            f"{name}-efs-ap", metadata={"name": STORAGE_CLASS}, provisioner=CSI_DRIVER,
            parameters=storage_class_parameters(args.efs, fs.id),
            # Deleting a claim keeps its access point and data, as the file system is kept.
            reclaim_policy="Retain", volume_binding_mode="Immediate",
            opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider, depends_on=list(ready)))

    def claim_in(self, namespace: str, depends_on: Sequence[pulumi.Resource]) -> list[pulumi.Resource]:
        """The read-only `efs-models` claim in `namespace` (after `depends_on`, e.g. the namespace), on a
        static volume of the models' access point: the same weights in every namespace. Access point volumes
        take the handle `efs:<fs>::<fsap>` and get TLS (examples/kubernetes/efs/access_points/README.md at
        v3.4.1); the node plugin stages nothing (pkg/driver/driver.go nodeCaps: volume stats only), so volumes
        sharing a handle mount apart."""
        handle = pulumi.Output.format("efs:{0}::{1}", self.file_system_id, self._access_point.id)
        # Read-only at the volume too: no pod of any namespace writes the shared weights through it.
        volume = StaticVolume(MODEL_PVC, f"{self._name}-models-pv", f"{self._name}-models", self._efs.claim_size,
                              {"driver": CSI_DRIVER, "volumeHandle": handle, "readOnly": True}, self._ready)
        return claim_in(volume, namespace, depends_on, self, self._provider)
