"""How a new VPC's block is cut into subnets: one definition for the VPC component (components/aws/vpc.py) and the
config rules that need the subnets' sizes (components/config/rules/network.py)."""

from __future__ import annotations

import ipaddress

# "Amazon Web Services reserves both the first four and the last IPv4 address in each subnet's CIDR block. They're
# not available for your use." (Amazon EC2 API Reference, CreateSubnet).
AWS_RESERVED_PER_SUBNET = 5


def subnet_layout(vpc_cidr: str, zones: int) -> tuple[list[str], list[str]]:
    """Private subnets take the first eighths of the VPC (one per zone, /19 of a /16: pods need
    addresses); the last eighth is cut into small public subnets that only hold NAT gateways and
    internet-facing load balancers."""
    eighths = list(ipaddress.ip_network(vpc_cidr).subnets(prefixlen_diff=3))
    private = [str(n) for n in eighths[:zones]]
    public = [str(n) for n in list(eighths[-1].subnets(prefixlen_diff=3))[:zones]]
    return private, public


def private_addresses(vpc_cidr: str, zones: int) -> int:
    """Addresses nodes and pods can take in the private subnets of a new VPC."""
    private, _ = subnet_layout(vpc_cidr, zones)
    return sum(ipaddress.ip_network(cidr).num_addresses - AWS_RESERVED_PER_SUBNET for cidr in private)
