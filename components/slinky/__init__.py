"""Slurm on Kubernetes through SchedMD's Slinky slurm-operator (`slinky.slurm.net/v1beta1`).

The pure modules (`images`, `slurm_conf`, `sizing`, `specs`) import no Pulumi resource types, so tools on the login
pod can read them; the components (`operator`, `cluster`, `state_storage`) create the resources.

Imports components.aws, components.compute, components.config, components.lifecycle, components.names,
components.segmentation and components.addons.handover (gitops' chart switch: a known loop, listed in
pyproject.toml's `loops` contract); ships slurm.accounts and slurm.health as source (the only slurm packages it
imports, by the `components` contract).
"""
