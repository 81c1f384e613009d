"""The VPC the cluster lives in: a new one with private subnets per zone, or an existing one.

Every private subnet carries `karpenter.sh/discovery=<cluster>` so Karpenter's EC2NodeClasses find it,
and `kubernetes.io/role/internal-elb` so internal load balancers (the login NLB) land there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.aws.iam import assume_role_policy
from components.config import cluster as cfg
from components.config.subnet_layout import subnet_layout

DISCOVERY_TAG = "karpenter.sh/discovery"
# Flow log delivery to CloudWatch Logs: the role VPC Flow Logs assumes and what it may do (Amazon VPC User Guide,
# flow-logs-iam-role.html), here on the one log group.
FLOW_LOGS_SERVICE = "vpc-flow-logs.amazonaws.com"
# Scoped to the one log group; the guide's `Resource: *` would let the role write to any group of the account.
FLOW_LOG_STREAM_ACTIONS = ["logs:CreateLogStream", "logs:PutLogEvents"]
# What jobs and nodes do with the stack's buckets through the gateway endpoint: read data, write checkpoints
# (multipart for large objects), list. No delete: a pruned checkpoint keeps its S3 copy (the FSx export refuses
# DELETED for the same reason, docs/operating.md "Backups and S3 copies").
BUCKET_ACTIONS = ["s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads"]
OBJECT_ACTIONS = ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


@dataclass(frozen=True)
class NetworkArgs:
    network: cfg.Network
    cluster_name: str
    region: str
    # Buckets the stack reads or writes through the S3 gateway endpoint (FSx data repositories).
    buckets: tuple[str, ...] = ()
    # Prefixes (bucket/prefix) where deleting is allowed too: the checkpoint store prunes its own copies.
    pruned_prefixes: tuple[str, ...] = ()


def ecr_layer_bucket(region: str) -> str:
    """Where ECR serves image layers from (Amazon ECR User Guide, vpc-endpoints.html, "Minimum Amazon S3 bucket
    permissions for Amazon ECR"): every node pulls the EKS add-on images through it."""
    return f"prod-{region}-starport-layer-bucket"


def s3_endpoint_policy(partition: str, region: str, buckets: tuple[str, ...],
                       pruned_prefixes: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
    """The gateway endpoint admits only the stack's own buckets and ECR's layer bucket: a pod or node cannot copy
    data to another account's bucket through it. AL2023 nodes bootstrap with nodeadm and install no packages,
    so the AL2023 repository buckets are not listed (a node running dnf would be refused here)."""
    def allow(sid: str, actions: str | list[str], resource: str | list[str]) -> dict[str, Any]:
        return {"Sid": sid, "Effect": "Allow", "Principal": "*", "Action": actions, "Resource": resource}

    statements = [allow("EcrImageLayers", "s3:GetObject", f"arn:{partition}:s3:::{ecr_layer_bucket(region)}/*")]
    if buckets:
        arns = [f"arn:{partition}:s3:::{b}" for b in sorted(set(buckets))]
        statements += [allow("StackBuckets", BUCKET_ACTIONS, arns),
                       allow("StackBucketObjects", OBJECT_ACTIONS, [f"{arn}/*" for arn in arns])]
    if pruned_prefixes:
        statements.append(allow("CheckpointStorePrune", "s3:DeleteObject",
                                [f"arn:{partition}:s3:::{p.strip('/')}/*" for p in sorted(set(pruned_prefixes))]))
    return {"Version": "2012-10-17", "Statement": statements}


def flow_log_policy(log_group_arn: str) -> dict[str, Any]:
    """Write streams of the one group (a stream's ARN is `<group ARN>:log-stream:<name>`) and describe them; the
    guide's DescribeLogGroups takes no resource (Service Authorization Reference, Amazon CloudWatch Logs)."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": FLOW_LOG_STREAM_ACTIONS, "Resource": f"{log_group_arn}:log-stream:*"},
        {"Effect": "Allow", "Action": "logs:DescribeLogStreams", "Resource": f"{log_group_arn}:*"},
        {"Effect": "Allow", "Action": "logs:DescribeLogGroups", "Resource": "*"}]}


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:Network", name, None, opts)
        self._args = args
        self._child = pulumi.ResourceOptions(parent=self)
        self._private_by_zone: dict[str, pulumi.Output[str]] = {}
        if args.network.creates_vpc:
            self._create_vpc(name)
        else:
            self._adopt_vpc(name)
        self._flow_log(name)
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnetIds": self.private_subnet_ids,
                               "publicSubnetIds": self.public_subnet_ids})

    def private_subnet_in(self, zone: str) -> pulumi.Output[str]:
        """The private subnet of one zone (FSx and EFA partitions live in the EFA zone)."""
        if zone in self._private_by_zone:
            return self._private_by_zone[zone]
        # Existing VPC: ask EC2 which of the given subnets is in that zone.
        subnets = [aws.ec2.get_subnet_output(id=sid, opts=pulumi.InvokeOutputOptions(parent=self))
                   for sid in self._args.network.private_subnet_ids]
        return pulumi.Output.all(*[pulumi.Output.all(s.id, s.availability_zone) for s in subnets]).apply(
            lambda pairs: _pick_zone(pairs, zone))

    def _create_vpc(self, name: str) -> None:
        net, cluster = self._args.network, self._args.cluster_name
        assert net.vpc_cidr is not None  # guaranteed by the network-source validator
        zones = net.availability_zones
        private_cidrs, public_cidrs = subnet_layout(net.vpc_cidr, len(zones))
        vpc = aws.ec2.Vpc(name, cidr_block=net.vpc_cidr, enable_dns_hostnames=True, enable_dns_support=True,
                          tags={"Name": cluster}, opts=self._child)
        igw = aws.ec2.InternetGateway(name, vpc_id=vpc.id, tags={"Name": cluster}, opts=self._child)
        public_rt = aws.ec2.RouteTable(f"{name}-public", vpc_id=vpc.id, tags={"Name": f"{cluster}-public"},
                                       routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0",
                                                                           gateway_id=igw.id)],
                                       opts=self._child)
        private_rts, private_ids, public_ids = [], [], []
        for zone, private_cidr, public_cidr in zip(zones, private_cidrs, public_cidrs, strict=True):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}", vpc_id=vpc.id, cidr_block=public_cidr, availability_zone=zone,
                map_public_ip_on_launch=False,
                tags={"Name": f"{cluster}-public-{zone}", "kubernetes.io/role/elb": "1"}, opts=self._child)
            aws.ec2.RouteTableAssociation(f"{name}-public-{zone}", subnet_id=public.id,
                                          route_table_id=public_rt.id, opts=self._child)
            # One NAT per zone: a zone outage does not cut the others off, and no cross-zone NAT traffic.
            eip = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags={"Name": f"{cluster}-nat-{zone}"},
                              opts=self._child)
            nat = aws.ec2.NatGateway(f"{name}-{zone}", allocation_id=eip.id, subnet_id=public.id,
                                     tags={"Name": f"{cluster}-{zone}"},
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}", vpc_id=vpc.id, cidr_block=private_cidr, availability_zone=zone,
                tags={"Name": f"{cluster}-private-{zone}", "kubernetes.io/role/internal-elb": "1",
                      DISCOVERY_TAG: cluster},
                opts=self._child)
            rt = aws.ec2.RouteTable(f"{name}-private-{zone}", vpc_id=vpc.id,
                                    routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0",
                                                                        nat_gateway_id=nat.id)],
                                    tags={"Name": f"{cluster}-private-{zone}"}, opts=self._child)
            aws.ec2.RouteTableAssociation(f"{name}-private-{zone}", subnet_id=private.id,
                                          route_table_id=rt.id, opts=self._child)
            private_rts.append(rt.id)
            private_ids.append(private.id)
            public_ids.append(public.id)
            self._private_by_zone[zone] = private.id
        # Training data and checkpoints move to and from S3 without NAT charges.
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, vpc_endpoint_type="Gateway",
                            service_name=f"com.amazonaws.{self._args.region}.s3", route_table_ids=private_rts,
                            policy=aws.get_partition_output().partition.apply(lambda p: json.dumps(
                                s3_endpoint_policy(p, self._args.region, self._args.buckets,
                                                   self._args.pruned_prefixes))),
                            tags={"Name": f"{cluster}-s3"}, opts=self._child)
        self.vpc_id = vpc.id
        self.private_subnet_ids = pulumi.Output.all(*private_ids)
        self.public_subnet_ids = pulumi.Output.all(*public_ids)

    def _flow_log(self, name: str) -> None:
        """Every accepted and rejected connection of the VPC, kept `network.flowLogRetentionDays` in CloudWatch
        Logs (encrypted at rest by the service)."""
        cluster = self._args.cluster_name
        group = aws.cloudwatch.LogGroup(f"{name}-flow-log", name=f"/slurm-eks/{cluster}/vpc-flow-log",
                                        retention_in_days=self._args.network.flow_log_retention_days,
                                        opts=self._child)
        role = aws.iam.Role(f"{name}-flow-log", assume_role_policy=assume_role_policy(FLOW_LOGS_SERVICE),
                            opts=self._child)
        aws.iam.RolePolicy(f"{name}-flow-log", role=role.id,
                           policy=group.arn.apply(lambda arn: json.dumps(flow_log_policy(arn))), opts=self._child)
        aws.ec2.FlowLog(f"{name}-flow-log", vpc_id=self.vpc_id, traffic_type="ALL",
                        log_destination_type="cloud-watch-logs", log_destination=group.arn, iam_role_arn=role.arn,
                        tags={"Name": f"{cluster}-flow-log"}, opts=self._child)

    def _adopt_vpc(self, name: str) -> None:
        net, cluster = self._args.network, self._args.cluster_name
        for sid in net.private_subnet_ids:
            aws.ec2.Tag(f"{name}-discovery-{sid}", resource_id=sid, key=DISCOVERY_TAG, value=cluster,
                        opts=self._child)
        assert net.vpc_id is not None  # guaranteed by the network-source validator
        self.vpc_id = pulumi.Output.from_input(net.vpc_id)
        self.private_subnet_ids = pulumi.Output.from_input(list(net.private_subnet_ids))
        self.public_subnet_ids = pulumi.Output.from_input([])


def _pick_zone(pairs: list[tuple[str, str]], zone: str) -> str:
    for sid, subnet_zone in pairs:
        if subnet_zone == zone:
            return sid
    raise ValueError(f"network.privateSubnetIds has no subnet in {zone} (network.efaAvailabilityZone); "
                     f"add a private subnet of that zone")
