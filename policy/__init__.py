"""The slurm-eks policy pack: rules that run offline on the plan (`slurm-eks policy`) and online in
`pulumi preview --policy-pack policy` (policy/__main__.py). Nothing here imports the program or the CLI."""
