"""Names several components agree on."""

SLURM_NAMESPACE = "slurm"
# Where the Kubernetes-native jobs (RayCluster, MPIJob, Volcano Job from `slurm-eks k8s render`) run, on
# `kubernetesPools`, with the same /shared and model claims as Slurm's pods (components/addons/k8s_operators.py).
ML_NAMESPACE = "ml"
# addons.mlflow (components/addons/mlflow.py): the tracking server's Service `mlflow` in namespace `mlflow`, on the
# port `mlflow server` listens on by default (mlflow 3.17.2 mlflow/utils/cli_args.py PORT: 5000). Jobs, login shells
# and notebooks log to it at MLFLOW_TRACKING_URI (Kubernetes DNS: <service>.<namespace>.svc.cluster.local,
# kubernetes.io/docs/concepts/services-networking/dns-pod-service/), the one name the server's --allowed-hosts admits.
MLFLOW_NAMESPACE = "mlflow"
MLFLOW_SERVICE = "mlflow"
MLFLOW_PORT = 5000
MLFLOW_HOST = f"{MLFLOW_SERVICE}.{MLFLOW_NAMESPACE}.svc.cluster.local"
MLFLOW_TRACKING_URI = f"http://{MLFLOW_HOST}:{MLFLOW_PORT}"
SHARED_PVC = "fsx-shared"  # the RWX claim on FSx for Lustre, in SLURM_NAMESPACE and every namespace mounting it
SHARED_MOUNT = "/shared"  # where login and compute pods mount it
SHARED_VOLUME_NAME = "shared"  # the pod volume of that claim
# Source ranges that mean "the whole internet".
WORLD_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
# Login pods run on their own tainted node group, away from the controllers that hold IAM powers
# (Karpenter, the CSI and CNI controllers): a login shell that escapes its pod finds no such credentials.
NODE_ROLE_LABEL = "node.slurm-eks.io/role"
LOGIN_NODE_SELECTOR = {NODE_ROLE_LABEL: "login"}
LOGIN_TAINT = {"key": "node.slurm-eks.io/login", "value": "true", "effect": "NoSchedule"}


def claim_volume_name(claim: str, namespace: str) -> str:
    """The static PersistentVolume (cluster-wide) bound to `claim` in `namespace`: one per namespace, since a
    volume binds one claim. The Slurm namespace's keeps the claim's own name."""
    return claim if namespace == SLURM_NAMESPACE else f"{claim}-{namespace}"
