"""`gitops`: Argo CD applies the Kubernetes side from a Git repository (the tree `slurm-eks gitops export`
writes) instead of Pulumi installing the charts. Without Pulumi, so the config can import it. Unset (the
default): Pulumi installs everything."""

from __future__ import annotations

from components.config_base import Model


class GitOps(Model):
    """Where Argo CD reads the exported tree."""
