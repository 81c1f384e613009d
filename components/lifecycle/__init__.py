"""The node lifecycle controller: what each node's checks expect (health_settings.py, pure: the config's rules
read it), what the controller does beyond repair (lifecycle_settings.py), and its Deployment (node_repair.py),
which ships slurm.health, slurm.topology, slurm.capacity and slurm.aws as source files (the only slurm packages it
imports, by the `components` contract in pyproject.toml).

Imports components.aws, components.config and components.names, components.compute (the scheduling labels) and,
in node_repair.py, components.slinky (the reconcile's client container, the pod specs): those two are known loops,
listed in pyproject.toml's `loops` contract.
"""
