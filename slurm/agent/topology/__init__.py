"""Slurm network topology from EC2: DescribeInstanceTopology through boto3 (`instance_topology`), the switch tree
the instances describe (`tree`), that tree as topology.conf or topology.yaml (`render`), and the lifecycle
controller's step that keeps it current (`sync`).

The standard library, and botocore for the EC2 client the controller passes in (slurm/agent/aws.py); the
`lifecycle` import-linter contract in pyproject.toml holds it to that.
"""
