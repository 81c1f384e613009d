"""Storage: FSx for Lustre (/shared, linked to S3) and EFS (/models), each with its CSI driver, and the static
claims that bind them in a namespace.

Imports components.aws, components.config, components.names, and components.addons.handover (gitops' chart
switch): a known loop, listed in pyproject.toml's `loops` contract.
"""
