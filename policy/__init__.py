"""The slurm-eks policy pack: rules that run offline on the plan (`slurm-eks policy`) and online in
`pulumi preview --policy-pack policy --policy-pack-config policy/config/<stack>.json` (policy/__main__.py),
both with that stack's pack config (policy/pack_config.py). Nothing here imports the program or the CLI."""
