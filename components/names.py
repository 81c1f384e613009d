"""Names several components agree on."""

SLURM_NAMESPACE = "slurm"
SHARED_PVC = "fsx-shared"  # the RWX claim on FSx for Lustre, in SLURM_NAMESPACE
SHARED_MOUNT = "/shared"  # where login and compute pods mount it
# On the login Service when `slurm.login.allowPublicSsh` is true: the policy pack (online and offline) sees
# that world-open SSH was asked for, not a mistake.
ALLOW_PUBLIC_SSH_ANNOTATION = "slurm-eks.io/allow-public-ssh"
# Source ranges that mean "the whole internet".
WORLD_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
