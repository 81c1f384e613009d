"""Rules on the network: where the VPC comes from, its size and zones, the EFA zone, the API endpoint, flow logs."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.rules.cluster import known_region
from components.config.rules.registry import Found, node_groups, rule
from components.config.subnet_layout import private_addresses
from components.names import WORLD_CIDRS


@rule("network-source")
def network_source(c: ClusterConfig) -> Iterator[Found]:
    n = c.network
    if n.vpc_cidr and n.vpc_id:
        yield Found("network", {"vpcCidr": n.vpc_cidr, "vpcId": n.vpc_id},
                    "both a new VPC (vpcCidr) and an existing one (vpcId) are set",
                    "keep vpcCidr to create a VPC, or vpcId + privateSubnetIds to use yours")
    elif not n.vpc_cidr and not n.vpc_id:
        yield Found("network", None, "no network: neither vpcCidr nor vpcId is set",
                    "set network.vpcCidr (e.g. 10.0.0.0/16) or network.vpcId + network.privateSubnetIds")
    elif n.vpc_id and len(n.private_subnet_ids) < 2:
        yield Found("network.privateSubnetIds", n.private_subnet_ids,
                    "EKS needs private subnets in at least two availability zones",
                    "list the IDs of two or more private subnets of the VPC")
    elif n.vpc_cidr and n.private_subnet_ids:
        yield Found("network.privateSubnetIds", n.private_subnet_ids,
                    "subnet IDs are only used with an existing VPC (vpcId)",
                    "remove privateSubnetIds, or replace vpcCidr by vpcId")


@rule("vpc-cidr-size")
def vpc_cidr_size(c: ClusterConfig) -> Iterator[Found]:
    if c.network.vpc_cidr:
        net = ipaddress.ip_network(c.network.vpc_cidr)
        if net.version != 4 or not 16 <= net.prefixlen <= 20:
            yield Found("network.vpcCidr", c.network.vpc_cidr,
                        "the VPC must be an IPv4 block between /16 and /20: every pod takes a VPC address",
                        "use a block such as 10.0.0.0/16")


@rule("max-nodes-addresses")
def max_nodes_within_addresses(c: ClusterConfig) -> Iterator[Found]:
    """A ceiling no quota lookup is needed for: every node takes at least its own address in the private subnets
    (its pods take more), so node groups whose maxNodes add up past those addresses can never reach them, and a
    typo such as maxNodes: 100000000 is caught here rather than priced. An adopted VPC's subnets are not known."""
    net = c.network
    if not net.vpc_cidr or not net.availability_zones:
        return
    try:
        addresses = private_addresses(net.vpc_cidr, len(net.availability_zones))
    except ValueError:
        return  # a bad vpcCidr: vpc-cidr-size and the parser say so
    groups = list(node_groups(c))
    total = sum(g.max_nodes for _, g in groups)
    if total > addresses:
        largest = max(groups, key=lambda item: item[1].max_nodes)
        yield Found(f"{largest[0]}.maxNodes", largest[1].max_nodes,
                    f"the node groups' maxNodes add up to {total}, more than the {addresses} addresses of the "
                    f"private subnets of {net.vpc_cidr} (every node takes one, its pods more): they can never all "
                    "come up", "set maxNodes to the nodes the partition should ever have (a 512-GPU run is 64 "
                    "nodes of 8 GPUs), or give a larger network.vpcCidr")


@rule("availability-zones")
def availability_zones(c: ClusterConfig) -> Iterator[Found]:
    zones = c.network.availability_zones
    if not c.network.vpc_cidr:
        if zones:
            yield Found("network.availabilityZones", zones,
                        "zones come from the existing subnets when vpcId is set",
                        "remove availabilityZones")
        return
    if len(zones) < 2 or len(set(zones)) != len(zones):
        yield Found("network.availabilityZones", zones,
                    "a new VPC needs two or more distinct availability zones (EKS requires two)",
                    f"list zones such as [{c.region}a, {c.region}b, {c.region}c]")
    if len(zones) > 7:
        yield Found("network.availabilityZones", zones, "at most 7 zones fit the subnet layout",
                    "list 2 to 7 zones")
    for i, zone in enumerate(zones):
        if not re.fullmatch(re.escape(c.region) + r"[a-z]", zone):
            yield Found(f"network.availabilityZones[{i}]", zone, f"not a zone of region {c.region}",
                        _zone_fix(c.region, "use a zone name such as"))


def _zone_fix(region: str, lead: str) -> str:
    """A zone to suggest, never one of a region that does not exist (the region rule reports that)."""
    if known_region(region):
        return f"{lead} {region}a"
    return f"fix `region` first ({region} is not a region AWS has), then {lead} <region>a"


@rule("efa-zone")
def efa_zone(c: ClusterConfig) -> Iterator[Found]:
    zone = c.network.efa_availability_zone
    efa = [where for where, p in node_groups(c) if p.efa]
    if efa and not zone:
        names = ", ".join(efa)
        yield Found("network.efaAvailabilityZone", None,
                    f"node groups with efa: true ({names}) need one zone: EFA traffic does not cross zones",
                    "set network.efaAvailabilityZone to the zone that holds your capacity")
    if zone and c.network.vpc_cidr and zone not in c.network.availability_zones:
        yield Found("network.efaAvailabilityZone", zone, "not one of network.availabilityZones",
                    f"use one of {c.network.availability_zones}")
    if zone and not zone.startswith(c.region):
        yield Found("network.efaAvailabilityZone", zone, f"not a zone of region {c.region}",
                    _zone_fix(c.region, "use a zone such as"))




@rule("api-deployer")
def api_deployer(c: ClusterConfig) -> Iterator[Found]:
    """`pulumi up` installs Helm releases and Kubernetes objects through the EKS API: from where?"""
    net, deployer = c.network, c.network.deployer
    if deployer is None:
        if not net.api_public_cidrs:
            yield Found("network.deployer", None,
                        "the EKS API endpoint is private and nothing says where `pulumi up` runs: from a "
                        "laptop or a hosted CI runner every Helm release and Kubernetes object would fail",
                        "add network.deployer: {via: public, cidrs: [<your CI/office range>]}, or {via: vpc, "
                        "cidrs: [...]} for a runner inside the VPC (docs/operating.md, Deploying privately)")
        return
    if deployer.via == "vpc" and net.creates_vpc:
        yield Found("network.deployer.via", "vpc",
                    "a deployer inside the VPC cannot exist before the `pulumi up` that creates the VPC",
                    "deploy into an existing VPC (network.vpcId) that holds the runner, or use via: public")
    for i, cidr in enumerate(deployer.cidrs):
        if cidr in WORLD_CIDRS:
            yield Found(f"network.deployer.cidrs[{i}]", cidr, "the whole internet is not a deployer",
                        "list the CI runner's or office's range")


# CloudWatch Logs PutRetentionPolicy: the retentionInDays values it accepts (CloudWatch Logs API Reference).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653)


@rule("flow-log-retention")
def flow_log_retention(c: ClusterConfig) -> Iterator[Found]:
    days = c.network.flow_log_retention_days
    if days not in LOG_RETENTION_DAYS:
        nearest = min(LOG_RETENTION_DAYS, key=lambda d: (abs(d - days), d))
        yield Found("network.flowLogRetentionDays", days, "CloudWatch Logs does not accept this retention",
                    f"use one of {', '.join(map(str, LOG_RETENTION_DAYS))}; nearest: {nearest}")
