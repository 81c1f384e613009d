"""Checks over an offline plan. `policy.py` runs the policy pack's rules (`policy/`) without a Pulumi server;
`deploy.py` is `slurm-eks check`: will `pulumi up` give a working cluster? One module per rule (`network.py`:
who reaches whom through the planned security groups; `order.py`: what exists before what; `iam*.py`: who
may do what), each returning `findings.Finding`s. Imports `scripts.offline`, `policy/` and the config model;
never `scripts.cli`.
"""
