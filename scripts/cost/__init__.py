"""`slurm-eks cost`: what a plan costs per hour (`estimate.py`), from a sourced price table (`price_table.py`,
`prices.json`) that `price_list.py` refreshes from the AWS Price List; `render.py` lays it out for the CLI. An
engine: returns values, never imports `scripts.cli`.
"""
