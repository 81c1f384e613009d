"""Checks over an offline plan: `policy.py` runs the policy pack's rules (`policy/`) without a Pulumi
server. Imports `scripts.offline` and `policy/`; never `scripts.cli`.
"""
