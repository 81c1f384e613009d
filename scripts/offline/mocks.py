"""Pulumi mocks that return realistic computed values, and a monitor that records every registration.

The values are deterministic (derived from the resource's type and name) so that two plans of the same
config are byte-identical and golden files stay stable.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2

from components.config.cluster import CONFIG_KEY, CONFIG_NAMESPACE
from scripts.offline.plan_model import UNKNOWN_WIRE_VALUE as _UNKNOWN_VALUE
from scripts.offline.plan_model import PlannedResource, plain, sanitize

ACCOUNT = "123456789012"
# Invokes that read a secret's value, which nothing offline knows: the plan shows them unknown, never made up.
SECRET_READS = ("aws:secretsmanager/getSecretVersion:getSecretVersion",)

# EC2-style ID prefixes by resource type (the part after the module, e.g. "ec2/vpc:Vpc" -> "vpc").
_ID_PREFIX = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
    "aws:ec2/placementGroup:PlacementGroup": "pg",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "sgr",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "sgr",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fs",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra",
    # EFS API reference, FileSystemDescription.FileSystemId `fs-[0-9a-f]{8,40}`, MountTargetId `fsmt-...`,
    # AccessPointDescription.AccessPointId `fsap-[0-9a-f]{8,40}`.
    "aws:efs/fileSystem:FileSystem": "fs",
    "aws:efs/mountTarget:MountTarget": "fsmt",
    "aws:efs/accessPoint:AccessPoint": "fsap",
}


def _digest(*parts: str, n: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


def cluster_security_group_id(cluster_name: str) -> str:
    """The security group EKS itself creates for the cluster (`eks-cluster-sg-<name>-<id>`): on the control
    plane's network interfaces and on every managed node."""
    return f"sg-0{_digest(cluster_name, 'cluster-sg')}"


def pulumi_eks_security_group_ids(cluster_name: str) -> tuple[str, str]:
    """The control-plane and node groups pulumi-eks creates unless `skipDefaultSecurityGroups` is set."""
    return (f"sg-0{_digest(cluster_name, 'eksClusterSecurityGroup')}",
            f"sg-0{_digest(cluster_name, 'nodeSecurityGroup')}")


_ALL = {"protocol": "-1", "fromPort": 0, "toPort": 0}
EKS_SG_SOURCE = ("docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html (Default cluster security group: "
                 "inbound all from self; outbound all to 0.0.0.0/0 and to self; tags kubernetes.io/cluster/<name>"
                 "=owned, aws:eks:cluster-name)")
PULUMI_EKS_SOURCE = ("pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts (eksClusterSecurityGroup, "
                     "eksClusterInternetEgressRule; clusterSecurityGroupId = core.clusterSecurityGroup?.id ?? "
                     "core.cluster.vpcConfig.clusterSecurityGroupId) and nodejs/eks/nodes/securitygroup.ts "
                     "(createNodeGroupSecurityGroup), at 7bf0c1b1 (2026-08-12)")


def eks_security_groups(cluster_urn: str, cluster_name: str, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    """The security groups an `eks.Cluster` brings, modelled from their sources. `role` says who carries
    each: `control-plane` (the API endpoint's network interfaces) or `pulumi-eks-nodes` (pulumi-eks's own
    node groups, which this program does not use)."""
    eks_sg = cluster_security_group_id(cluster_name)
    groups = [{
        "type": "aws:ec2/securityGroup:SecurityGroup", "id": eks_sg, "name": f"eks-cluster-sg-{cluster_name}",
        "createdBy": cluster_urn, "source": EKS_SG_SOURCE, "role": ["control-plane"],
        "inputs": {"tags": {f"kubernetes.io/cluster/{cluster_name}": "owned", "aws:eks:cluster-name": cluster_name},
                   "ingress": [{**_ALL, "self": True}],
                   "egress": [{**_ALL, "cidrBlocks": ["0.0.0.0/0"]}, {**_ALL, "self": True}]},
    }]
    if inputs.get("skipDefaultSecurityGroups"):
        return groups
    control, nodes = pulumi_eks_security_group_ids(cluster_name)
    tags = inputs.get("tags") or {}
    groups += [{
        "type": "aws:ec2/securityGroup:SecurityGroup", "id": control, "name": f"{cluster_name}-eksClusterSecurityGroup",
        "createdBy": cluster_urn, "source": PULUMI_EKS_SOURCE, "role": ["control-plane"],
        "inputs": {"tags": {"Name": f"{cluster_name}-eksClusterSecurityGroup", **tags},
                   "ingress": [{"protocol": "tcp", "fromPort": 443, "toPort": 443, "securityGroups": [nodes]}],
                   "egress": [{**_ALL, "cidrBlocks": ["0.0.0.0/0"]}]},
    }, {
        "type": "aws:ec2/securityGroup:SecurityGroup", "id": nodes, "name": f"{cluster_name}-nodeSecurityGroup",
        "createdBy": cluster_urn, "source": PULUMI_EKS_SOURCE, "role": ["pulumi-eks-nodes"],
        "inputs": {"tags": {f"kubernetes.io/cluster/{cluster_name}": "owned", **tags},
                   "ingress": [{**_ALL, "self": True},
                               {"protocol": "tcp", "fromPort": 1025, "toPort": 65535, "securityGroups": [control]},
                               {"protocol": "tcp", "fromPort": 443, "toPort": 443, "securityGroups": [control]}],
                   "egress": [{**_ALL, "cidrBlocks": ["0.0.0.0/0"]}]},
    }]
    return groups


@dataclass
class RealisticMocks(pulumi.runtime.Mocks):
    """Computed values shaped like the real ones: EC2 IDs, ARNs, DNS names, a kubeconfig."""

    region: str
    cluster_name: str
    # Resources `pulumi up` creates without registering them here (see Plan.modelled).
    modelled: list[dict[str, Any]] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        rid = self._id(args)
        state.update(self._computed(args, rid))
        return rid, state

    def record_modelled(self, urn: str, type_: str, inputs: dict[str, Any]) -> None:
        if type_ == "eks:index:Cluster":
            self.modelled.extend(eks_security_groups(urn, self.cluster_name, inputs))

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT, "arn": f"arn:aws:iam::{ACCOUNT}:user/planner",
                    "userId": "AIDAPLANNER"}, []
        if token == "aws:iam/getSessionContext:getSessionContext":
            # The planner is an IAM user: getSessionContext passes a non-role ARN through as issuerArn
            # (pulumi-aws docs, aws.iam.getSessionContext).
            arn = str(args.args.get("arn", ""))
            return {"arn": arn, "issuerArn": arn, "id": arn}, []
        if token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            # A 12-hour docker login, only `pulumi up` can get: unknown offline, as a secret read is.
            return {"userName": "AWS", "password": _UNKNOWN_VALUE, "authorizationToken": _UNKNOWN_VALUE,
                    "proxyEndpoint": f"https://{ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com",
                    "id": self.region}, []
        if token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        if token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}, []
        if token == "aws:ec2/getVpc:getVpc":
            return {"id": str(args.args.get("id", "vpc-0")), "cidrBlock": "10.0.0.0/16"}, []
        if token == "aws:ec2/getSubnet:getSubnet":
            sid = str(args.args.get("id", "subnet-0"))
            return {"id": sid, "availabilityZone": self._subnet_zone(sid), "vpcId": "vpc-existing"}, []
        return {}, []

    def _subnet_zone(self, sid: str) -> str:
        """An existing VPC's subnets lie in consecutive zones, in the order the stack lists them (its
        `availabilityZones` if given, else a, b, c, ...), so a consistent config plans without errors."""
        network = (pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY) or {}).get("network") or {}
        listed = network.get("privateSubnetIds") or []
        zones = network.get("availabilityZones") or [f"{self.region}{letter}" for letter in "abcdef"]
        if sid in listed:
            return zones[listed.index(sid) % len(zones)]
        return f"{self.region}{'abc'[int(_digest(sid), 16) % 3]}"

    def _id(self, args: pulumi.runtime.MockResourceArgs) -> str:
        prefix = _ID_PREFIX.get(args.typ)
        if prefix:
            return f"{prefix}-0{_digest(args.typ, args.name)}"
        if args.typ == "aws:kms/key:Key":
            d = _digest(args.name, n=32)
            return f"{d[:8]}-{d[8:12]}-{d[12:16]}-{d[16:20]}-{d[20:32]}"
        if args.typ.startswith("aws:iam/") or args.typ.startswith("aws:sqs/"):
            return str(args.inputs.get("name") or args.name)
        if args.typ.startswith("kubernetes:") and "metadata" in args.inputs:
            meta = args.inputs["metadata"] or {}
            return "/".join(x for x in (meta.get("namespace"), meta.get("name") or args.name) if x)
        return f"{args.name}-{_digest(args.typ, args.name, n=8)}"

    def _arn(self, service: str, resource: str, regional: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if regional else ''}:{ACCOUNT}:{resource}"

    def _computed(self, args: pulumi.runtime.MockResourceArgs, rid: str) -> dict[str, Any]:
        typ, name, inputs = args.typ, args.name, args.inputs
        service = typ.split(":")[1].split("/")[0] if typ.startswith("aws:") else ""
        out: dict[str, Any] = {}
        if typ.startswith("aws:"):
            arn_service = {"vpc": "ec2", "cloudwatch": "events"}.get(service, service)
            out["arn"] = self._arn(arn_service, f"{typ.rsplit(':', 1)[1].lower()}/{rid}",
                                   regional=service != "iam")
            out.setdefault("tagsAll", inputs.get("tags") or {})
        if typ == "aws:iam/role:Role":
            out.update(arn=self._arn("iam", f"role/{rid}", regional=False), name=rid,
                       uniqueId="AROA" + _digest(name, n=17).upper())
        elif typ == "aws:iam/instanceProfile:InstanceProfile":
            out.update(arn=self._arn("iam", f"instance-profile/{rid}", regional=False), name=rid)
        elif typ == "aws:iam/policy:Policy":
            out.update(arn=self._arn("iam", f"policy/{rid}", regional=False), name=rid)
        elif typ == "aws:kms/key:Key":
            out.update(keyId=rid, arn=self._arn("kms", f"key/{rid}"))
        elif typ == "aws:cloudwatch/logGroup:LogGroup":
            # pulumi-aws docs, cloudwatch.LogGroup `arn`: the API's `:*` suffix (all streams) is removed.
            group = inputs.get("name") or rid
            out.update(arn=self._arn("logs", f"log-group:{group}"), name=group)
        elif typ == "aws:sqs/queue:Queue":
            qname = inputs.get("name") or name
            out.update(arn=self._arn("sqs", qname), name=qname,
                       url=f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT}/{qname}")
        elif typ == "aws:ec2/securityGroup:SecurityGroup":
            out.update(arn=self._arn("ec2", f"security-group/{rid}"))
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            out.update(latestVersion=1, defaultVersion=1)
        elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            out.update(dnsName=f"{rid}.fsx.{self.region}.amazonaws.com", mountName=_digest(rid, n=8),
                       networkInterfaceIds=[f"eni-0{_digest(rid, 'eni')}"])
        elif typ == "aws:efs/fileSystem:FileSystem":
            # ARN: service authorization reference, EFS resource type file-system; DNS name: EFS user guide
            # mounting-fs-mount-cmd-dns-name.html (file-system-id.efs.aws-region.amazonaws.com).
            out.update(arn=self._arn("elasticfilesystem", f"file-system/{rid}"),
                       dnsName=f"{rid}.efs.{self.region}.amazonaws.com")
        elif typ == "aws:rds/instance:Instance":
            host = f"{inputs.get('identifier') or name}.c{_digest(name, n=12)}.{self.region}.rds.amazonaws.com"
            out.update(address=host, endpoint=f"{host}:3306", port=3306, resourceId=f"db-{_digest(name).upper()}")
            if inputs.get("manageMasterUserPassword"):
                # The secret RDS makes for the master password (RDS User Guide, rds-secrets-manager.html): its ARN
                # as Secrets Manager writes them, name `rds!db-<id>` plus the 6-character suffix.
                out["masterUserSecrets"] = [{"secretArn": self._arn(
                    "secretsmanager", f"secret:rds!db-{_digest(name, n=8)}-{_digest(name, 's', n=6)}"),
                    "secretStatus": "active", "kmsKeyId": self._arn("kms", "alias/aws/secretsmanager")}]
        elif typ == "aws:ecr/repository:Repository":
            # ECR User Guide, Repository concepts: <account>.dkr.ecr.<region>.amazonaws.com/<name>.
            repository = inputs.get("name") or rid
            out.update(arn=self._arn("ecr", f"repository/{repository}"), name=repository, registryId=ACCOUNT,
                       repositoryUrl=f"{ACCOUNT}.dkr.ecr.{self.region}.amazonaws.com/{repository}")
        elif typ == "docker-build:index:Image":
            # Only the build knows the image's digest: `ref` (<tag>@<digest>) and `digest` are unknown until
            # `pulumi up` has built and pushed it (pulumi-docker-build, Image outputs).
            out.update(digest=_UNKNOWN_VALUE, ref=_UNKNOWN_VALUE, contextHash=_UNKNOWN_VALUE)
        elif typ == "eks:index:Cluster":
            out.update(self._eks_outputs(inputs))
        elif typ.startswith("random:"):
            out.update(result=f"planned-{_digest(typ, name, n=24)}")
        elif typ == "kubernetes:core/v1:Service":
            out["status"] = {"loadBalancer": {"ingress": [
                {"hostname": f"{name}-{_digest(name, n=12)}.elb.{self.region}.amazonaws.com"}]}}
        return out

    def _eks_outputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """pulumi-eks `Cluster` outputs (nodejs/eks/cluster/cluster.ts, see PULUMI_EKS_SOURCE): its own groups
        unless `skipDefaultSecurityGroups`, else the group EKS creates."""
        endpoint = f"https://{_digest(self.cluster_name, n=32).upper()}.gr7.{self.region}.eks.amazonaws.com"
        issuer = f"https://oidc.eks.{self.region}.amazonaws.com/id/{_digest(self.cluster_name, n=32).upper()}"
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "aws",
            "clusters": [{"name": "kubernetes", "cluster": {"server": endpoint,
                                                             "certificate-authority-data": "LS0tLS1CRUdJTg=="}}],
            "contexts": [{"name": "aws", "context": {"cluster": "kubernetes", "user": "aws"}}],
            "users": [{"name": "aws", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                "args": ["eks", "get-token", "--cluster-name", self.cluster_name, "--region", self.region]}}}],
        }
        eks_sg = cluster_security_group_id(self.cluster_name)
        control, nodes = (eks_sg, eks_sg) if inputs.get("skipDefaultSecurityGroups") else \
            pulumi_eks_security_group_ids(self.cluster_name)
        return {
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "clusterSecurityGroupId": control,
            "nodeSecurityGroupId": nodes,
            "oidcIssuer": issuer.removeprefix("https://"),
            "oidcProviderUrl": issuer,
            "oidcProviderArn": f"arn:aws:iam::{ACCOUNT}:oidc-provider/{issuer.removeprefix('https://')}",
        }


@dataclass
class RecordingMonitor(MockMonitor):
    """A MockMonitor that keeps what every RegisterResource request asked for."""

    mocks: RealisticMocks
    recorded: list[PlannedResource] = field(default_factory=list)
    stack_outputs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.mocks)

    def RegisterResource(self, request: Any) -> Any:
        # Unlike MockMonitor's, this never deserializes resource references: doing so re-creates the
        # referenced resource on this thread's event loop, which breaks pulumi-eks's remote components.
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        wire = json_format.MessageToDict(request.object)
        rid, state = self.mocks.new_resource(pulumi.runtime.MockResourceArgs(
            typ=request.type, name=request.name, inputs=plain(wire), provider=request.provider,
            resource_id=request.importId, custom=bool(request.custom)))
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, rid, state)
        self.mocks.record_modelled(urn, request.type, plain(wire))
        self.recorded.append(PlannedResource(
            urn=urn,
            type=request.type,
            name=request.name,
            parent=request.parent or None,
            provider=request.provider.rsplit("::", 1)[0] if request.provider else None,
            dependencies=sorted(set(request.dependencies)),
            custom=bool(request.custom),
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            inputs=sanitize(request.type, wire),
            id=rid if request.custom else None,
        ))
        return resource_pb2.RegisterResourceResponse(
            urn=urn, id=rid, object=json_format.ParseDict(state, struct_pb2.Struct()))

    def ReadResource(self, request: Any) -> Any:
        """A read (`Secret.get`) asks the live cluster or account, which an offline plan has not: its outputs
        are unknown, as the engine reports a read it skipped (ReadResourceResponse.unknown, which the pulumi
        3.272 SDK's runtime/resource.py read_resource resolves as unknown outputs)."""
        return resource_pb2.ReadResourceResponse(urn=self.make_urn(request.parent, request.type, request.name),
                                                 unknown=True)

    def Invoke(self, request: Any) -> Any:
        """Secret lookups answer unknown (ResourceInvokeResponse.unknown, the engine's answer for an invoke it
        cannot run yet; runtime/invoke.py makes the result unknown); the others as the mocks model them."""
        if request.tok in SECRET_READS:
            return resource_pb2.ResourceInvokeResponse(unknown=True)
        return super().Invoke(request)

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if "::pulumi:pulumi:Stack::" in request.urn:
            self.stack_outputs = sanitize("pulumi:pulumi:Stack", json_format.MessageToDict(request.outputs))
        return super().RegisterResourceOutputs(request)
