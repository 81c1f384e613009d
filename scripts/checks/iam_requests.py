"""The AWS requests each controller makes, as IAM sees them: action, resource ARN and the condition keys the
controller's own code sets (request tags on create, the tags a resource carries, the region it calls).

Written from the controllers' sources, independently of the components that write their policies (a
wrong tag name there must show here). Sources:
- Karpenter: aws/karpenter-provider-aws at v1.14.1 (commit bde00654c);
- FSx for Lustre CSI driver: kubernetes-sigs/aws-fsx-csi-driver at 5b227125 (v1.9.0, chart 1.17.0);
- EBS CSI driver: kubernetes-sigs/aws-ebs-csi-driver at v1.64.0;
- EFS CSI driver: kubernetes-sigs/aws-efs-csi-driver at v3.4.1 (commit 3fcc6bdd, chart 4.4.1);
- the node lifecycle controller: the EC2 operations slurm/agent/contract.py names, which tests/agent hold to the
  calls the agent really makes through botocore;
- the VPC CNI: aws/amazon-vpc-cni-k8s pkg/awsutils/awsutils.go (ipamd's EC2 calls: createENI, attachENI, freeENI,
  AllocIPAddresses, DeallocIPAddresses, and the describes) at v1.20;
- the MLflow tracking server (addons.mlflow): mlflow 3.17.2 mlflow/store/artifact/s3_artifact_repo.py, the S3 calls
  its artifact proxy makes under --artifacts-destination;
- the jobs' checkpoint store (storage.checkpointStore): jobs/checkpoint_store/store.py, this repository's own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from scripts.checks.iam_policy import Request, Value
from scripts.cost.price_list import pricing_endpoint_region
from slurm.agent import contract

# Example IDs: the policies scope by resource type, tags and region, never by ID.
EC2_IDS = {"image": "ami-0123456789abcdef0", "snapshot": "snap-0123456789abcdef0", "subnet": "subnet-0123456789abcdef0",
           "security-group": "sg-0123456789abcdef0", "placement-group": "pg-0123456789abcdef0",
           "capacity-reservation": "cr-0123456789abcdef0", "launch-template": "lt-0123456789abcdef0",
           "instance": "i-0123456789abcdef0", "volume": "vol-0123456789abcdef0",
           "network-interface": "eni-0123456789abcdef0", "fleet": "fleet-01234567-89ab-cdef-0123-456789abcdef",
           "spot-instances-request": "sir-01234567"}
PUBLIC = ("image", "snapshot")  # Amazon's AMIs and their snapshots: no account in the ARN
KARPENTER_READS = ("DescribeCapacityReservations", "DescribeImages", "DescribeInstances", "DescribeInstanceStatus",
                   "DescribeInstanceTypeOfferings", "DescribeInstanceTypes", "DescribeLaunchTemplates",
                   "DescribePlacementGroups", "DescribeSecurityGroups", "DescribeSpotPriceHistory",
                   "DescribeSubnets")  # pkg/aws/sdk.go EC2API
EBS_READS = ("DescribeAvailabilityZones", "DescribeInstances", "DescribeVolumes", "DescribeVolumesModifications")


@dataclass(frozen=True)
class NodeClass:
    name: str
    role: str  # the node role's name
    tags: Mapping[str, str]  # spec.tags
    nodepools: tuple[str, ...]
    spot: bool  # some NodePool of it may launch spot capacity
    placement_group: bool
    capacity_reservations: bool


@dataclass(frozen=True)
class Facts:
    """What the requests depend on, read from the plan."""

    partition: str
    region: str
    account: str
    cluster: str
    kubernetes_version: str
    node_classes: tuple[NodeClass, ...] = ()
    interruption_queue: str | None = None
    # The node lifecycle controller's settings.json (components/lifecycle/node_repair.py), as its pod reads them.
    lifecycle: Mapping[str, object] | None = None
    vpc: str = ""  # the cluster's VPC ID
    mlflow_artifacts: str | None = None  # the MLflow server's --artifacts-destination (s3://bucket/prefix)
    checkpoint_store: str | None = None  # storage.checkpointStore.s3, as the jobs' job.env names it

    # Built here, not with components.aws.iam.Scope: a wrong ARN there must show as a denied request here.
    def arn(self, service: str, resource: str, region: str | None = None, account: str | None = None) -> str:
        return (f"arn:{self.partition}:{service}:{self.region if region is None else region}:"
                f"{self.account if account is None else account}:{resource}")

    def ec2(self, kind: str) -> str:
        return self.arn("ec2", f"{kind}/{EC2_IDS[kind]}", account="" if kind in PUBLIC else None)


@dataclass(frozen=True)
class Call:
    request: Request
    source: str  # where the controller makes it


@dataclass(frozen=True)
class Controller:
    name: str
    service_account: str  # `system:serviceaccount:<namespace>:<name>`, as its IRSA trust names it
    policy_source: str  # the policy its project documents
    calls: Callable[[Facts], list[Call]]


def request_tags(tags: Mapping[str, str]) -> dict[str, Value]:
    """The keys a create-with-tags request carries."""
    return {**{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": tuple(tags)}


def resource_tags(service: str, tags: Mapping[str, str]) -> dict[str, Value]:
    """The keys an existing resource's tags give: global `aws:` and the service's own prefix."""
    return {f"{prefix}:ResourceTag/{k}": v for prefix in ("aws", service) for k, v in tags.items()}


def tagged_on_create(tags: Mapping[str, str], action: str) -> dict[str, Value]:
    """The keys of the ec2:CreateTags that a create call with TagSpecifications implies."""
    return {**request_tags(tags), "ec2:CreateAction": action}


def _call(facts: Facts, action: str, resource: str, source: str, context: Mapping[str, Value] | None = None,
          region: str | None = None) -> Call:
    # Every request carries the region it is sent to.
    return Call(Request(action, resource, {"aws:RequestedRegion": region or facts.region, **(context or {})}), source)


# Karpenter (paths in aws/karpenter-provider-aws at v1.14.1)
KARPENTER_TAGS = "pkg/utils/utils.go GetTags"
PROFILE_TAGS = "pkg/apis/v1/ec2nodeclass.go InstanceProfileTags"


def _owned(facts: Facts, node_class: NodeClass) -> dict[str, str]:
    """The tags Karpenter puts on everything it creates for a node class, over the class's own."""
    return {**node_class.tags, f"kubernetes.io/cluster/{facts.cluster}": "owned",
            "eks:eks-cluster-name": facts.cluster, "karpenter.k8s.aws/ec2nodeclass": node_class.name}


def launch_tags(facts: Facts, node_class: NodeClass, nodepool: str) -> dict[str, str]:
    """Launch templates, fleets, instances, volumes, interfaces (KARPENTER_TAGS)."""
    return {**_owned(facts, node_class), "karpenter.sh/nodepool": nodepool}


def _launch(facts: Facts, node_class: NodeClass, tags: Mapping[str, str], source: str) -> Iterator[Call]:
    """A launch template, then CreateFleet, whose instant fleet calls RunInstances as Karpenter."""
    template = facts.ec2("launch-template")
    created = ["instance", "volume", "network-interface", "fleet"]
    existing = ["image", "snapshot", "subnet", "security-group"]
    if node_class.spot:
        created.append("spot-instances-request")
    if node_class.placement_group:
        existing.append("placement-group")
    if node_class.capacity_reservations:
        existing.append("capacity-reservation")
    lt_source = f"{source}; pkg/providers/launchtemplate/types.go (TagSpecifications)"
    yield _call(facts, "ec2:CreateLaunchTemplate", template, lt_source, request_tags(tags))
    yield _call(facts, "ec2:CreateTags", template, lt_source, tagged_on_create(tags, "CreateLaunchTemplate"))
    for action in ("CreateFleet", "RunInstances"):
        fleet_source = f"{source}; pkg/providers/instance/types.go (CreateFleetInputBuilder)"
        yield _call(facts, f"ec2:{action}", template, fleet_source, resource_tags("ec2", tags))
        for kind in existing:
            yield _call(facts, f"ec2:{action}", facts.ec2(kind), fleet_source)
        for kind in created:
            arn = facts.ec2(kind)
            yield _call(facts, f"ec2:{action}", arn, fleet_source, request_tags(tags))
            yield _call(facts, "ec2:CreateTags", arn, fleet_source, tagged_on_create(tags, action))


def _node_class_calls(facts: Facts, node_class: NodeClass) -> Iterator[Call]:
    # The EC2NodeClass controller validates with dry runs for a NodeClaim with no labels, so an empty
    # nodepool tag (pkg/controllers/nodeclass/validation.go).
    yield from _launch(facts, node_class, launch_tags(facts, node_class, ""), "pkg/controllers/nodeclass/validation.go")
    profile_tags = {**_owned(facts, node_class), "topology.kubernetes.io/region": facts.region}  # PROFILE_TAGS
    # Path and name: pkg/controllers/nodeclass/instanceprofile.go (FormatPath, InstanceProfileName).
    profile = facts.arn("iam", f"instance-profile/karpenter/{facts.region}/{facts.cluster}/uid/{facts.cluster}_1",
                        region="")
    source = f"pkg/providers/instanceprofile/instanceprofile.go; tags: {PROFILE_TAGS}"
    ec2 = "ec2.amazonaws.com.cn" if facts.partition == "aws-cn" else "ec2.amazonaws.com"
    yield _call(facts, "iam:GetInstanceProfile", profile, source)
    yield _call(facts, "iam:CreateInstanceProfile", profile, source, request_tags(profile_tags))
    # Adding a role to a profile passes the role (docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html).
    yield _call(facts, "iam:PassRole", facts.arn("iam", f"role/{node_class.role}", region=""), source,
                {"iam:PassedToService": ec2})
    for action in ("AddRoleToInstanceProfile", "RemoveRoleFromInstanceProfile", "DeleteInstanceProfile"):
        yield _call(facts, f"iam:{action}", profile, source, resource_tags("iam", profile_tags))
    for nodepool in node_class.nodepools:
        tags = launch_tags(facts, node_class, nodepool)
        yield from _launch(facts, node_class, tags, f"pkg/providers/instance/instance.go; tags: {KARPENTER_TAGS}")
        instance = facts.ec2("instance")
        # Only the keys the instance lacks: eks:eks-cluster-name came with the launch.
        yield _call(facts, "ec2:CreateTags", instance, "pkg/controllers/nodeclaim/tagging/controller.go",
                    {**resource_tags("ec2", tags), **request_tags({"Name": "ip-10-0-0-1.ec2.internal",
                                                                   "karpenter.sh/nodeclaim": f"{nodepool}-abcde"})})
        yield _call(facts, "ec2:TerminateInstances", instance, "pkg/providers/instance/instance.go",
                    resource_tags("ec2", tags))
        yield _call(facts, "ec2:DeleteLaunchTemplate", facts.ec2("launch-template"),
                    "pkg/providers/launchtemplate/launchtemplate.go", resource_tags("ec2", tags))


def karpenter_calls(facts: Facts) -> list[Call]:
    pricing_region = pricing_endpoint_region(facts.region)  # pricing.go NewAPI
    parameter = (f"parameter/aws/service/eks/optimized-ami/{facts.kubernetes_version}/amazon-linux-2023/x86_64/"
                 "nvidia/recommended/image_id")
    calls = [_call(facts, f"ec2:{action}", "*", "pkg/aws/sdk.go EC2API") for action in KARPENTER_READS]
    calls += [
        _call(facts, "ssm:GetParameter", facts.arn("ssm", parameter, account=""), "pkg/providers/amifamily/al2023.go"),
        _call(facts, "pricing:GetProducts", "*", "pkg/providers/pricing/pricing.go", region=pricing_region),
        _call(facts, "eks:DescribeCluster", facts.arn("eks", f"cluster/{facts.cluster}"), "pkg/operator/operator.go"),
        # No resource-level permissions: IAM authorizes it on `*` (upstream's AllowUnscopedInstanceProfileListAction).
        _call(facts, "iam:ListInstanceProfiles", "*", "pkg/providers/instanceprofile/instanceprofile.go ListProfiles"),
    ]
    if facts.interruption_queue:
        queue = facts.arn("sqs", facts.interruption_queue)
        calls += [_call(facts, f"sqs:{action}", queue, "pkg/providers/sqs/sqs.go")
                  for action in ("GetQueueUrl", "ReceiveMessage", "DeleteMessage")]
    for node_class in facts.node_classes:
        calls += _node_class_calls(facts, node_class)
    return calls


def fsx_csi_calls(facts: Facts) -> list[Call]:
    # DescribeFileSystems has no resource-level permissions: listing every file system (pollFileSystems) and
    # describing one (ValidateVolumeCapabilities) are both authorized on `*`.
    return [_call(facts, "fsx:DescribeFileSystems", "*", "pkg/cloud/cloud.go pollFileSystems, DescribeFileSystem")]


def ebs_csi_calls(facts: Facts) -> list[Call]:
    """Dynamic provisioning, attachment and expansion of the state volumes (a Retain class: never deleted)."""
    # pkg/driver/controller.go CreateVolume: the driver's own tags, and the claim's from the provisioner's
    # --extra-create-metadata.
    tags = {"CSIVolumeName": "pvc-0123", "ebs.csi.aws.com/cluster": "true",
            "kubernetes.io/created-for/pvc/name": "state", "kubernetes.io/created-for/pvc/namespace": "slurm",
            "kubernetes.io/created-for/pv/name": "pvc-0123"}
    volume, node = facts.ec2("volume"), facts.ec2("instance")
    source = "pkg/cloud/cloud.go"
    calls = [_call(facts, f"ec2:{action}", "*", source) for action in EBS_READS]
    calls += [_call(facts, "ec2:CreateVolume", volume, source, request_tags(tags)),
              _call(facts, "ec2:CreateTags", volume, source, tagged_on_create(tags, "CreateVolume")),
              _call(facts, "ec2:ModifyVolume", volume, source, resource_tags("ec2", tags))]
    for action in ("AttachVolume", "DetachVolume"):
        calls += [_call(facts, f"ec2:{action}", volume, source, resource_tags("ec2", tags)),
                  _call(facts, f"ec2:{action}", node, source)]
    return calls


def efs_csi_calls(facts: Facts) -> list[Call]:
    """Dynamic provisioning of access points on the model file system (storage.efs)."""
    # pkg/driver/controller.go buildAccessPointTags: DefaultTagKey with DefaultTagValue; no --tags flag here.
    tags = {"efs.csi.aws.com/cluster": "true"}
    access_point = facts.arn("elasticfilesystem", "access-point/fsap-0123456789abcdef0")
    file_system = facts.arn("elasticfilesystem", "file-system/fs-0123456789abcdef0")
    source = "pkg/cloud/cloud.go"
    calls = [_call(facts, f"elasticfilesystem:{action}", file_system, f"{source} {fn}")
             for action, fn in (("DescribeFileSystems", "DescribeFileSystem"),
                                ("DescribeMountTargets", "DescribeMountTargets"),
                                ("DescribeAccessPoints", "ListAccessPoints, FindAccessPointByClientToken"))]
    calls.append(_call(facts, "elasticfilesystem:DescribeAccessPoints", access_point, f"{source} DescribeAccessPoint"))
    # CreateAccessPoint with Tags also authorizes elasticfilesystem:TagResource (Service Authorization
    # Reference, list_efs.html "API operations": CreateAccessPoint -> CreateAccessPoint, TagResource); the
    # new access point carries the request's tags, which is what upstream's TagResource statement relies on.
    created = {**request_tags(tags), **resource_tags("elasticfilesystem", tags)}
    # IAM authorizes CreateAccessPoint on the file system it is made in (Service Authorization Reference).
    calls += [_call(facts, "elasticfilesystem:CreateAccessPoint", file_system, f"{source} CreateAccessPoint",
                    request_tags(tags)),
              _call(facts, "elasticfilesystem:TagResource", access_point, f"{source} CreateAccessPoint", created),
              _call(facts, "elasticfilesystem:DeleteAccessPoint", access_point, f"{source} DeleteAccessPoint",
                    resource_tags("elasticfilesystem", tags))]
    return calls


def lifecycle_calls(facts: Facts) -> list[Call]:
    """EC2 reads of the steps its settings turn on; neither action has a resource type, so IAM sees "*"
    (Service Authorization Reference, list_amazonec2.html)."""
    if not facts.lifecycle:
        return []
    settings = contract.LifecycleSettings.parse(facts.lifecycle)
    return [_call(facts, f"ec2:{operation}", "*", f"the lifecycle agent's {operation} (slurm/agent/contract.py)")
            for operation in settings.ec2_calls()]


def vpc_cni_calls(facts: Facts) -> list[Call]:
    """ipamd on a node: an interface for pods created in one of the cluster's subnets with its security groups,
    tagged on create, attached to the node's instance (delete on termination set through
    ModifyNetworkInterfaceAttribute), IPs assigned and unassigned, then detached and deleted."""
    source = "pkg/awsutils/awsutils.go"
    vpc = {"ec2:Vpc": facts.arn("ec2", f"vpc/{facts.vpc}")}
    eni, instance = facts.ec2("network-interface"), facts.ec2("instance")
    node = resource_tags("ec2", {f"kubernetes.io/cluster/{facts.cluster}": "owned"})
    tags = {"node.k8s.amazonaws.com/instance_id": EC2_IDS["instance"], "node.k8s.amazonaws.com/createdAt": "2026"}
    calls = [_call(facts, f"ec2:{action}", "*", f"{source} describes") for action in
             ("DescribeInstances", "DescribeTags", "DescribeNetworkInterfaces", "DescribeSubnets",
              "DescribeSecurityGroups", "DescribeInstanceTypes")]
    calls += [_call(facts, "ec2:CreateNetworkInterface", eni, f"{source} createENI", request_tags(tags)),
              _call(facts, "ec2:CreateNetworkInterface", facts.ec2("subnet"), f"{source} createENI", vpc),
              _call(facts, "ec2:CreateNetworkInterface", facts.ec2("security-group"), f"{source} createENI", vpc),
              _call(facts, "ec2:CreateTags", eni, f"{source} createENI (TagSpecifications)",
                    tagged_on_create(tags, "CreateNetworkInterface"))]
    for action, fn in (("AttachNetworkInterface", "attachENI"), ("ModifyNetworkInterfaceAttribute", "attachENI"),
                       ("DetachNetworkInterface", "freeENI")):
        calls += [_call(facts, f"ec2:{action}", eni, f"{source} {fn}", vpc),
                  _call(facts, f"ec2:{action}", instance, f"{source} {fn}", node)]
    calls += [_call(facts, f"ec2:{action}", eni, f"{source} {fn}", vpc) for action, fn in (
        ("DeleteNetworkInterface", "freeENI"), ("AssignPrivateIpAddresses", "AllocIPAddresses"),
        ("UnassignPrivateIpAddresses", "DeallocIPAddresses"))]
    return calls


# An artifact of run 0123... of experiment 1: the proxy keeps a run's artifacts at <destination>/<experiment>/<run>/
# artifacts/ (its default artifact root is mlflow-artifacts:/, mlflow/utils/server_cli_utils.py).
MLFLOW_RUN_PATH = "1/0123456789abcdef0123456789abcdef/artifacts"


def mlflow_calls(facts: Facts) -> list[Call]:
    """The server's artifact proxy: log_artifact is upload_file (PutObject; a large file's CreateMultipartUpload,
    UploadPart and CompleteMultipartUpload are authorized as s3:PutObject, and AbortMultipartUpload on a failed one,
    docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html), a download is download_file (HeadObject and
    GetObject, both s3:GetObject), a listing is list_objects_v2 with Prefix (s3:ListBucket with s3:prefix)."""
    if not facts.mlflow_artifacts:
        return []
    bucket, _, prefix = facts.mlflow_artifacts.removeprefix("s3://").partition("/")
    run = f"{prefix.rstrip('/')}/{MLFLOW_RUN_PATH}"
    obj, bucket_arn = f"arn:{facts.partition}:s3:::{bucket}/{run}/model/model.safetensors", \
        f"arn:{facts.partition}:s3:::{bucket}"
    source = "mlflow 3.17.2 mlflow/store/artifact/s3_artifact_repo.py"
    return [_call(facts, "s3:PutObject", obj, f"{source} log_artifact (upload_file)"),
            _call(facts, "s3:AbortMultipartUpload", obj, f"{source} abort_multipart_upload"),
            _call(facts, "s3:GetObject", obj, f"{source} _download_file (download_file)"),
            _call(facts, "s3:ListBucket", bucket_arn, f"{source} list_artifacts (list_objects_v2)",
                  {"s3:prefix": f"{run}/"}),
            _call(facts, "s3:ListBucket", bucket_arn, f"{source} list_artifacts at the destination's root",
                  {"s3:prefix": f"{prefix.rstrip('/')}/"})]


def checkpoint_store_calls(facts: Facts) -> list[Call]:
    """What jobs/checkpoint_store asks of S3 for alice's job train-42 (the keys jobs/checkpoint_store/location.py
    makes): store.py upload (upload_fileobj: PutObject, multipart parts as PutObject, AbortMultipartUpload on a
    failed one; head_object: s3:GetObject), manifests and has (list_objects_v2 with Prefix: s3:ListBucket with
    s3:prefix; get_object), restore (download_file: GetObject), prune (delete_object, delete_objects:
    s3:DeleteObject each), jobs (list_objects_v2 at the prefix and each user's, with Delimiter)."""
    if not facts.checkpoint_store:
        return []
    bucket, _, prefix = facts.checkpoint_store.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    under = f"{prefix}/" if prefix else ""
    job = f"{under}alice/train-42/"
    obj = f"arn:{facts.partition}:s3:::{bucket}/{job}step-40/__0_0.distcp"
    bucket_arn = f"arn:{facts.partition}:s3:::{bucket}"
    source = "jobs/checkpoint_store/store.py"
    return [_call(facts, "s3:PutObject", obj, f"{source} upload (upload_fileobj)"),
            _call(facts, "s3:AbortMultipartUpload", obj, f"{source} upload (a failed multipart upload)"),
            _call(facts, "s3:GetObject", obj, f"{source} upload (head_object), restore (download_file)"),
            _call(facts, "s3:DeleteObject", obj, f"{source} prune (delete_objects)"),
            _call(facts, "s3:ListBucket", bucket_arn, f"{source} manifests (list_objects_v2)", {"s3:prefix": job}),
            _call(facts, "s3:ListBucket", bucket_arn, f"{source} jobs (every user)", {"s3:prefix": under}),
            _call(facts, "s3:ListBucket", bucket_arn, f"{source} jobs (one user)", {"s3:prefix": f"{under}alice/"})]


CONTROLLERS = (
    Controller("Karpenter", "system:serviceaccount:kube-system:karpenter",
               "aws/karpenter-provider-aws website/content/en/v1.14/getting-started/getting-started-with-karpenter/"
               "cloudformation.yaml", karpenter_calls),
    Controller("the FSx CSI controller", "system:serviceaccount:kube-system:fsx-csi-controller-sa",
               "kubernetes-sigs/aws-fsx-csi-driver docs/install.md", fsx_csi_calls),
    Controller("the EBS CSI controller", "system:serviceaccount:kube-system:ebs-csi-controller-sa",
               "kubernetes-sigs/aws-ebs-csi-driver docs/AmazonEBSCSIDriverPolicyV2.json", ebs_csi_calls),
    Controller("the EFS CSI controller", "system:serviceaccount:kube-system:efs-csi-controller-sa",
               "kubernetes-sigs/aws-efs-csi-driver docs/iam-policy-example.json", efs_csi_calls),
    Controller("the node lifecycle controller", "system:serviceaccount:slurm:slurm-eks-repair",
               "components/slinky/lifecycle_settings.py ec2_actions", lifecycle_calls),
    Controller("the VPC CNI", "system:serviceaccount:kube-system:aws-node",
               "aws/amazon-vpc-cni-k8s docs/iam-policy.md (scope-down per cluster)", vpc_cni_calls),
    Controller("the MLflow tracking server", "system:serviceaccount:mlflow:mlflow",
               "components/addons/mlflow.py artifact_policy", mlflow_calls),
    Controller("the jobs' checkpoint store", "system:serviceaccount:slurm:slurm-eks-jobs",
               "components/slinky/job_aws.py store_policy", checkpoint_store_calls),
)
