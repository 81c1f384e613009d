"""Slurm on Kubernetes through SchedMD's Slinky slurm-operator (`slinky.slurm.net/v1beta1`).

The pure modules (`images`, `slurm_conf`, `sizing`, `specs`) import no Pulumi resource types, so tools on the login
pod can read them; the components (`operator`, `cluster`, `state_storage`) create the resources.

Also: the node-health and lifecycle settings each node and slurm.conf take (health_settings.py,
lifecycle_settings.py), the daemons' ports (ports.py), Slurm's accounting database (accounting_db*.py).

Layer: above storage, compute, kubernetes, aws and config; observability, lifecycle and add-ons build on it. Ships
slurm.accounts and slurm.health as source (the only slurm packages it imports, by the `components` contract).
"""
