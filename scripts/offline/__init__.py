"""The offline plan: the real Pulumi program run under Pulumi's mocks, with nothing sent to AWS.

`plan.py` runs `__main__.py` and writes the plan; `mocks.py` answers with realistic values and records
every registration; `plan_model.py` is the recorded plan (resources, manifests, JSON); `diff.py` compares
two plans. Imports `components/` (config and validation) and Pulumi; never `scripts.cli`.
"""
