"""`addons`: the Kubernetes-native side beside Slurm, each part opt-in (unset: not installed). They run on
`kubernetesPools` or the system nodes, never on the partitions' nodes. Without Pulumi, so the config can import it."""

from __future__ import annotations

from components.config.base import Model
from components.config.jupyterhub import JupyterHub
from components.config.k8s_operators import KubeRay, MpiOperator, Volcano
from components.config.mlflow import Mlflow


class Addons(Model):
    jupyterhub: JupyterHub | None = None
    mlflow: Mlflow | None = None  # the tracking server and model registry (components/config/mlflow.py)
    kuberay: KubeRay | None = None
    mpi_operator: MpiOperator | None = None
    volcano: Volcano | None = None

    @property
    def batch_operators(self) -> bool:
        """Whether any Kubernetes batch operator is on (then jobs get the `ml` namespace)."""
        return any(a is not None for a in (self.kuberay, self.mpi_operator, self.volcano))
