"""`slurm-eks k8s render`: RayCluster, MPIJob and Volcano objects for a Kubernetes pool (scripts/cli/k8s.py)."""
