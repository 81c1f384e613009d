"""Read-only AWS account checks before a deploy (boto3): `runner.py` opens the session and runs checks,
`checks.py` holds one function per check. Imports the config model and the instance catalog; never
`scripts.cli`.
"""
