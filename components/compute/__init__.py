"""The nodes: the instance catalog (catalog.py, a pure table the config reads), how a partition's pods find
its nodes (scheduling.py), Karpenter with an EC2NodeClass and NodePool per partition and pool, the device plugins,
and KEDA scaling of each partition's NodeSet from its queue (autoscaling.py).

Imports components.aws, components.config, components.names and components.segmentation. autoscaling.py also reads
components.slinky and components.observability, and two modules use components.addons.handover: known loops,
listed in pyproject.toml's `loops` contract.
"""
