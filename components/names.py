"""Names several components agree on."""

SLURM_NAMESPACE = "slurm"
SHARED_PVC = "fsx-shared"  # the RWX claim on FSx for Lustre, in SLURM_NAMESPACE
SHARED_MOUNT = "/shared"  # where login and compute pods mount it
SHARED_VOLUME_NAME = "shared"  # the pod volume of that claim
# Source ranges that mean "the whole internet".
WORLD_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
# Login pods run on their own tainted node group, away from the controllers that hold IAM powers
# (Karpenter, the CSI and CNI controllers): a login shell that escapes its pod finds no such credentials.
NODE_ROLE_LABEL = "node.slurm-eks.io/role"
LOGIN_NODE_SELECTOR = {NODE_ROLE_LABEL: "login"}
LOGIN_TAINT = {"key": "node.slurm-eks.io/login", "value": "true", "effect": "NoSchedule"}
