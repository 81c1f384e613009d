"""`slurm-eks up|preview|destroy`: the gates a stack must pass before Pulumi touches the account (gates.py), and the
Pulumi CLI invocation they hand over to (pulumi_cli.py)."""
