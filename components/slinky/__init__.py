"""Slurm on Kubernetes through SchedMD's Slinky slurm-operator (`slinky.slurm.net/v1beta1`).

The pure modules (`images`, `slurm_conf`, `sizing`, `specs`) import no Pulumi resource types, so tools on the login
pod can read them; the components (`operator`, `cluster`, `state_storage`) create the resources.
"""
