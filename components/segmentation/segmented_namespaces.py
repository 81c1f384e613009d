"""Each namespace the program installs into, ready before anything runs in it: the Namespace with its Pod
Security labels (components/kubernetes/namespaces.py), then its NetworkPolicies
(components/segmentation/network_policies.py: default
deny and the flows the cluster needs). Whatever runs there depends on both, so no pod ever runs unsegmented or
under the wrong Pod Security level, even during the first `pulumi up`."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config.cluster import ClusterConfig
from components.kubernetes.namespaces import namespace
from components.segmentation.network_policies import policy_documents


@dataclass(frozen=True)
class SegmentedNamespaces:
    config: ClusterConfig
    vpc_cidr: pulumi.Input[str]
    provider: k8s.Provider

    def create(self, resource_name: str, name: str, parent: pulumi.Resource) -> list[pulumi.Resource]:
        """The Namespace `name` (first) and the NetworkPolicies that live in it: what its workloads depend on."""
        created = namespace(resource_name, name, self.provider, parent)
        opts = pulumi.ResourceOptions(parent=parent, provider=self.provider, depends_on=[created])
        return [created, *(
            k8s.networking.v1.NetworkPolicy(f"{resource_name}-{doc['metadata']['name']}", metadata=doc["metadata"],
                                            spec=doc["spec"], opts=opts)
            for doc in policy_documents(self.config, self.vpc_cidr) if doc["metadata"]["namespace"] == name)]
