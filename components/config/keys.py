"""The stack config's key in a Pulumi stack file (`config: slurm-eks:cluster:`), apart from the pydantic models so
that reading a stack file's location or key costs no model import (the CLI's `--help` path)."""

CONFIG_NAMESPACE = "slurm-eks"
CONFIG_KEY = "cluster"
FULL_KEY = f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"
