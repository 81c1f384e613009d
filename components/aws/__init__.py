"""AWS itself: the VPC, the EKS control plane with its system node group and the Kubernetes provider, the EKS
add-ons (their pinned versions in addon_versions.py, a pure table the config's rules read) and the IAM the
components share.

Imports components.config and components.names only; the other packages of components/ build on it.
"""
