"""The twin's pod network: one Linux bridge on this machine, one network namespace per pod, joined to the
bridge by a veth pair, each with its own address inside the stack's VPC range (pods on EKS take VPC addresses:
the VPC CNI), so the NetworkPolicies' ipBlock rules read the addresses as they would in the cluster.

Names of namespaces and links carry a short twin id, so two twins (or a twin and a test) never share one.
Everything here shells out to iproute2 (`ip`), the tool the kernel's own documentation uses; nothing is
left behind by `teardown`, and `teardown` is safe to call on a half-built network.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass

from scripts.twin.errors import TwinError

# Linux interface names are at most 15 bytes (IFNAMSIZ 16 with the NUL).
IFNAMSIZ = 15
# Hosts of the pod subnet the twin takes: the machine's own address on the bridge, then pods in order.
HOST_INDEX = 1
FIRST_POD_INDEX = 10
# The last /24 of the VPC range: private subnets of our stacks start at the bottom (components/aws/vpc.py),
# so the top /24 is free of anything the plan names.
POD_PREFIX = 24
# Services outside the VPC (the twin's AWS endpoints, a local MLflow): addresses of TEST-NET-1 (RFC 5737,
# documentation only), so the policies read them as the internet, as S3's and STS's public addresses are. They
# sit on the same bridge: pods reach them on-link, without routing through this machine.
OUTSIDE = ipaddress.IPv4Network("192.0.2.0/24")


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    command = ["ip", *(["-n", netns] if netns else []), *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise TwinError(f"`{' '.join(command)}` failed: {(result.stderr or result.stdout).strip()}")
    return result


def pod_subnet(vpc_cidr: str) -> ipaddress.IPv4Network:
    """The /24 at the top of the VPC range."""
    vpc = ipaddress.ip_network(vpc_cidr)
    if vpc.prefixlen > POD_PREFIX:
        raise TwinError(f"network.vpcCidr {vpc_cidr} is smaller than a /{POD_PREFIX}; the twin needs one /24 of it")
    return list(vpc.subnets(new_prefix=POD_PREFIX))[-1]


@dataclass(frozen=True)
class PodLink:
    """A pod's network namespace and its address."""

    pod: str
    netns: str
    address: ipaddress.IPv4Address


@dataclass
class PodNetwork:
    """The bridge and the pods attached so far."""

    twin_id: str
    subnet: ipaddress.IPv4Network

    def __post_init__(self) -> None:
        self.links: dict[str, PodLink] = {}

    @property
    def bridge(self) -> str:
        return f"tw{self.twin_id}"[:IFNAMSIZ]

    @property
    def host_address(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + HOST_INDEX

    def netns_name(self, pod: str) -> str:
        return f"twin-{self.twin_id}-{pod}"

    def create_bridge(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{self.host_address}/{self.subnet.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def attach(self, pod: str, index: int | None = None) -> PodLink:
        """A new network namespace for `pod` with the next free address (or host `index` of the subnet)."""
        used = {link.address for link in self.links.values()}
        if index is None:
            index = next(i for i in range(FIRST_POD_INDEX, self.subnet.num_addresses - 1)
                         if self.subnet.network_address + i not in used)
        address = self.subnet.network_address + index
        return self._namespace(pod, address, self.subnet.prefixlen,
                               [["default", "via", str(self.host_address)], [str(OUTSIDE), "dev", "eth0"]])

    def attach_outside(self, name: str, index: int) -> PodLink:
        """A namespace for a service outside the VPC at OUTSIDE's host `index`, on-link with the pods."""
        return self._namespace(name, OUTSIDE.network_address + index, 32, [[str(self.subnet), "dev", "eth0"]])

    def _namespace(self, pod: str, address: ipaddress.IPv4Address, prefixlen: int,
                   routes: list[list[str]]) -> PodLink:  # fmt: skip
        if pod in self.links:
            raise TwinError(f"pod {pod} already has a network namespace")
        netns = self.netns_name(pod)
        number = len(self.links)
        host_end, pod_end = f"tw{self.twin_id}h{number}"[:IFNAMSIZ], f"tw{self.twin_id}p{number}"[:IFNAMSIZ]
        ip("netns", "add", netns)
        ip("link", "add", host_end, "type", "veth", "peer", "name", pod_end)
        ip("link", "set", pod_end, "netns", netns)
        ip("link", "set", host_end, "master", self.bridge)
        ip("link", "set", host_end, "up")
        ip("link", "set", "lo", "up", netns=netns)
        ip("link", "set", pod_end, "name", "eth0", netns=netns)
        ip("addr", "add", f"{address}/{prefixlen}", "dev", "eth0", netns=netns)
        ip("link", "set", "eth0", "up", netns=netns)
        for route in routes:
            ip("route", "add", *route, netns=netns)
        link = PodLink(pod, netns, address)
        self.links[pod] = link
        return link

    def detach(self, pod: str) -> None:
        """Delete the pod's namespace (its veth goes with it)."""
        link = self.links.pop(pod, None)
        if link is not None:
            ip("netns", "del", link.netns, check=False)

    def teardown(self) -> None:
        for pod in list(self.links):
            self.detach(pod)
        # Namespaces of an earlier run of this twin id that crashed before recording them.
        listed = ip("netns", "list", check=False).stdout.split("\n")
        for line in listed:
            name = line.split(" ", 1)[0]
            if name.startswith(f"twin-{self.twin_id}-"):
                ip("netns", "del", name, check=False)
        ip("link", "del", self.bridge, check=False)
