"""A twin of a stack's Slurm cluster that runs on one Linux machine from the stack's offline plan."""
