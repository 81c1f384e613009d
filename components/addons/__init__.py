"""The Kubernetes-native side beside Slurm, each part opt-in: gitops mode (Argo CD and its Applications),
JupyterHub, and the batch operators (KubeRay, the MPI Operator from its release manifest, Volcano).

Layer: above slinky, storage, compute and kubernetes (it imports them, and config, aws and the root modules);
beside lifecycle, which it never imports. jupyterhub.py ships slurm.rest_client as source (the only slurm module
it imports, by the `components` contract in pyproject.toml).
"""
