"""Entry point of the policy pack: `pulumi preview --policy-pack policy` runs this file.

Pulumi runs it as a script from this directory; the rules are the `policy` package of the repository
(shared with `slurm-eks policy`), so its root goes on the import path first.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policy.pack import policies

PolicyPack(name="slurm-eks", enforcement_level=EnforcementLevel.MANDATORY, policies=policies())
