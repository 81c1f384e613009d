"""Security group ingress in one shape, whichever of the three AWS resource forms declares it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from components.names import WORLD_CIDRS
from policy.model import UNKNOWN, items

WORLD = WORLD_CIDRS
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
LEGACY_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"  # what pulumi-eks creates for its groups
INGRESS_TYPES = frozenset({SECURITY_GROUP, INGRESS_RULE, LEGACY_RULE})
_ALL_PROTOCOLS = ("-1", "all")
_TCP = ("tcp", "6")


@dataclass(frozen=True)
class Ingress:
    protocol: str
    from_port: Any
    to_port: Any
    sources: tuple[str, ...]  # CIDRs and prefix lists: addresses, not security groups

    def covers(self, port: int) -> bool:
        if self.protocol in _ALL_PROTOCOLS:
            return True
        if self.protocol not in _TCP or not all(isinstance(p, int) for p in (self.from_port, self.to_port)):
            return False  # another protocol, or ports unknown until deploy
        return self.from_port <= port <= self.to_port

    @property
    def world(self) -> list[str]:
        return sorted(WORLD.intersection(self.sources))


def ingress_of(type_: str, inputs: Mapping[str, Any]) -> list[Ingress]:
    """The ingress a resource declares; [] for egress and other types."""
    if type_ == INGRESS_RULE:
        sources = (inputs.get("cidrIpv4"), inputs.get("cidrIpv6"), inputs.get("prefixListId"))
        return [Ingress(str(inputs.get("ipProtocol")), _port(inputs.get("fromPort")), _port(inputs.get("toPort")),
                        _addresses(sources))]
    if type_ == LEGACY_RULE:
        return [_block(inputs)] if inputs.get("type") == "ingress" else []
    if type_ == SECURITY_GROUP:
        return [_block(block) for block in items(inputs.get("ingress")) if isinstance(block, Mapping)]
    return []


def _block(block: Mapping[str, Any]) -> Ingress:
    # A security group's inline `ingress` entry and a legacy SecurityGroupRule share these names.
    sources = [*items(block.get("cidrBlocks")), *items(block.get("ipv6CidrBlocks")),
               *items(block.get("prefixListIds"))]
    return Ingress(str(block.get("protocol")), _port(block.get("fromPort")), _port(block.get("toPort")),
                   _addresses(sources))


def _port(value: Any) -> Any:
    # Pulumi's wire format carries every number as a double: 22.0 online, 22 in the plan.
    return int(value) if isinstance(value, float) else value


def _addresses(sources: Any) -> tuple[str, ...]:
    # An address not known until deploy is left out: rules report only what they can see.
    return tuple(s for s in sources if s and s != UNKNOWN)
