"""slurm-eks: a Slurm cluster on Amazon EKS. Config: stacks/Pulumi.<stack>.yaml (see README.md)."""

import pulumi

from components.program import build, load_config

for key, value in build(load_config(), pulumi.get_stack()).items():
    pulumi.export(key, value)
