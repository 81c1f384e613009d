"""The nodes: how a partition's pods find its nodes (scheduling.py), Karpenter with an EC2NodeClass and NodePool
per partition and Kubernetes pool, and the device plugins. The instance catalog they read is components/catalog.py.

Layer: above kubernetes, aws and config; beside storage, which it never imports.
"""
