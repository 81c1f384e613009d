"""The semantic rules of a stack config, one module per domain, each rule a named validator (`@rule`) that
yields findings with the config path, the bad value, what is wrong and the fix (registry.py).

Importing this package registers every rule, in the order below (the order problems are reported in);
`run_validators` runs them all. Rules read only the typed config and pure tables (the instance catalog, the
pinned add-on versions, Slinky's image series): no Pulumi, so the CLI's fast paths and the policy pack's
stack rules can import them.
"""

from components.config.rules import (  # noqa: F401  (each import registers its domain's rules)
    addons,
    cluster,
    health,
    login,
    mlflow,
    network,
    partitions,
    pools,
    slurm,
    storage,
    teams,
)
from components.config.rules.registry import VALIDATORS, Found, rule, run_validators, stack_rule

__all__ = ["VALIDATORS", "Found", "rule", "run_validators", "stack_rule"]
