"""Slurm accounts, users and QoS reconciled with `sacctmgr` to a desired state (a JSON document the stack
renders, components/slinky/accounts.py).

Standard library only: the reconcile runs as `python3 -m slurm.agent.accounts apply --desired FILE` in Slinky's
login image, which has Python (a dependency of its supervisor) but no pip packages. Modules, one job each:
`values` (how sacctmgr writes and stores values), `model` (the state as data), `desired` (the JSON document),
`sacctmgr` (running it), `current` (reading what slurmdbd holds), `plan` (the ordered changes),
`reconcile` (plan and apply, as the CLIs call them). What it owns and what removal keeps: docs/accounts.md.
"""
