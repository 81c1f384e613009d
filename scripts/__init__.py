"""The `slurm-eks` tool, one package per job. Dependencies point one way (pyproject.toml's import-linter contracts):

- `cli/`: the typer commands, the only layer that prints or exits; it may import everything below.
- `offline/`: the Pulumi program under mocks, the recorded plan and the diff of two plans.
- `checks/`: checks over an offline plan (the policy pack, the deploy check); imports `offline/`, `policy/`, config.
- `manifests/`: validation of Kubernetes manifests (CRD schemas, CEL, core schemas); imports nothing of ours.
- `preflight/`: read-only AWS account checks with boto3; imports the config model and catalog.

Engines return values and raise typed errors; none imports `cli/`, typer or rich.
"""
