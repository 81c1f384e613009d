"""`addons.kuberay`, `addons.mpiOperator`, `addons.volcano`: Kubernetes batch operators installed from their
pinned charts, for workloads on `kubernetesPools`. Without Pulumi, so the config can import it. Unset (the
default) installs nothing; `{}` installs the operator with its defaults."""

from __future__ import annotations

from components.config.base import Model


class KubeRay(Model):
    """The KubeRay operator (RayCluster, RayJob)."""


class MpiOperator(Model):
    """The Kubeflow MPI Operator (MPIJob v2beta1)."""


class Volcano(Model):
    """Volcano's scheduler, controllers and admission (Queue, PodGroup, Job)."""
