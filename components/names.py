"""Names several components agree on."""

SLURM_NAMESPACE = "slurm"
SHARED_PVC = "fsx-shared"  # the RWX claim on FSx for Lustre, in SLURM_NAMESPACE
SHARED_MOUNT = "/shared"  # where login and compute pods mount it
SHARED_VOLUME_NAME = "shared"  # the pod volume of that claim
# Source ranges that mean "the whole internet".
WORLD_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
