"""Slurm's side of reserved EC2 capacity: maintenance reservations over the end of Capacity Blocks."""
