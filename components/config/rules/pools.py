"""Rules on Kubernetes pools (`kubernetesPools`): names and node counts."""

from __future__ import annotations

from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.rules.registry import K8S_NAME, MAX_PARTITION_NAME, Found, rule


@rule("pool-name")
def pool_name(c: ClusterConfig) -> Iterator[Found]:
    """A pool's NodePool, EC2NodeClass and placement group are named like a partition's: a shared name would
    make one group's Karpenter objects overwrite the other's."""
    for name in c.kubernetes_pools:
        if not K8S_NAME.match(name) or len(name) > MAX_PARTITION_NAME:
            yield Found(f"kubernetesPools.{name}", name, "pool names become Kubernetes object and label values",
                        f"use lowercase letters, digits and '-' (at most {MAX_PARTITION_NAME}), "
                        "starting and ending with a letter or digit, e.g. ml-h100")
        if name in c.partitions:
            yield Found(f"kubernetesPools.{name}", name, f"partition {name} has the same name: both would be "
                        f"the NodePool and EC2NodeClass {name}", "rename the pool, e.g. k8s-" + name)


@rule("pool-min-nodes")
def pool_min_nodes(c: ClusterConfig) -> Iterator[Found]:
    for name, pool in c.kubernetes_pools.items():
        if pool.min_nodes:
            yield Found(f"kubernetesPools.{name}.minNodes", pool.min_nodes,
                        "Karpenter launches a pool's node only for a pending pod that needs it: no node is kept "
                        "warm, so this would be silently ignored", "remove minNodes (0)")
