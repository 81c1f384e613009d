"""The Kubernetes-native side beside Slurm, each part opt-in: gitops mode (Argo CD, its Applications, and
handover.py, the switch every chart install goes through), JupyterHub, and the batch operators (KubeRay, the MPI
Operator, Volcano).

Imports components.aws, components.compute, components.config, components.names, components.segmentation,
components.storage and components.slinky (the chart pins: a known loop, listed in pyproject.toml's `loops`
contract); jupyterhub.py ships slurm.rest_client as source (the only slurm module it imports, by the `components`
contract).
"""
