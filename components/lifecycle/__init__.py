"""What keeps the nodes following the work: KEDA scaling each partition's NodeSet from its queue
(autoscaling.py), and the node lifecycle controller's Deployment (node_repair.py: repair, active checks, topology,
Capacity Block reservations), which ships slurm.health, slurm.topology and slurm.capacity as source
files (the only slurm packages it imports, by the `components` contract in pyproject.toml).

Layer: above observability (the metrics KEDA reads) and slinky (the NodeSets, the client container); beside
addons, which it never imports.
"""
