"""The whole cluster from one validated config: the Pulumi program `__main__.py` runs."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.cluster import EksCluster, EksClusterArgs
from components.config import CONFIG_KEY, CONFIG_NAMESPACE, ClusterConfig
from components.network import Network, NetworkArgs
from components.problems import ConfigError
from components.validation import parse_cluster_config


def load_config() -> ClusterConfig:
    """Read and validate `slurm-eks:cluster` before any resource exists; a bad config stops here."""
    raw = pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY)
    try:
        config, warnings = parse_cluster_config(raw, f"stack {pulumi.get_stack()}")
    except ConfigError as exc:
        raise pulumi.RunError(exc.render()) from None
    for warning in warnings:
        pulumi.log.warn(warning.render())
    return config


def build(config: ClusterConfig, stack: str) -> dict[str, pulumi.Input[object]]:
    """Create every component; return the stack outputs."""
    name = config.name_for(stack)
    tags = dict(sorted({"slurm-eks:cluster": name, "slurm-eks:stack": stack, **config.tags}.items()))
    aws_provider = aws.Provider("aws", region=config.region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags))
    opts = pulumi.ResourceOptions(providers={"aws": aws_provider})
    network = Network("network", NetworkArgs(config.network, name, config.region), opts)
    cluster = EksCluster("eks", EksClusterArgs(config, name, network), opts)
    return {
        "clusterName": name,
        "region": config.region,
        "vpcId": network.vpc_id,
        "privateSubnetIds": network.private_subnet_ids,
        "oidcProviderArn": cluster.oidc_provider_arn,
        "kubeconfig": pulumi.Output.secret(cluster.kubeconfig),
    }
