"""The typed stack config (`slurm-eks:cluster`): its pydantic models (cluster.py, base.py and a module per
section), reading a stack file the way `pulumi` does (stackfile.py, stack_secrets.py), validation into a
`ClusterConfig` or every problem at once (validation.py, problems.py) and the semantic rules (rules/).

No Pulumi, not even through another module (the contract `config` in pyproject.toml's [tool.importlinter]), so
the CLI's fast paths and the policy pack load it. It imports the standard library, pydantic, PyYAML,
components.names and the pure tables its rules read: components.compute.catalog, components.aws.addon_versions,
components.lifecycle.health_settings (and through it components.compute.scheduling), components.slinky.images.
Those tables live in packages that import the config, so each is a known loop between packages, listed in the
`loops` contract.
"""
