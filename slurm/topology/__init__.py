"""Slurm network topology from EC2: DescribeInstanceTopology responses (`instance_topology`), the switch tree
they describe (`tree`), and that tree as topology.conf or topology.yaml (`render`).

Standard library only: it runs in the cluster's containers, which have python3 and no pip packages.
"""
