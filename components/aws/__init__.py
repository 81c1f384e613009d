"""AWS itself: the VPC, the EKS control plane with its system node group and the Kubernetes provider, the EKS
add-ons and the IAM the components share.

Layer: just above config (it imports config and the root modules only); everything else builds on it.
"""
