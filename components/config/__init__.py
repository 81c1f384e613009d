"""The typed stack config (`slurm-eks:cluster`): its pydantic models (cluster.py, base.py and a module per
section), the pure tables its rules read (addon_versions.py: EKS add-on versions; slinky_releases.py: the Slurm
releases Slinky built), reading a stack file the way `pulumi` does (stackfile.py, stack_secrets.py), validation
into a `ClusterConfig` or every finding at once (validation.py) and the semantic rules (rules/, one module per
domain).

Layer: the bottom of components/ but for the root modules (catalog, names, findings): it imports nothing else of
the project and no Pulumi, not even through another module (contracts `config` and `components-layers`), so the
CLI's fast paths and the policy pack load it.
"""
