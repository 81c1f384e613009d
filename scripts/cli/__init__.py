"""The `slurm-eks` commands (typer): parse options, call an engine, print the result, choose the exit code.

The only layer of the tool that prints or exits. `main.py` holds the app and the stack commands (validate,
plan, diff); each other module registers one command or command group. May import every engine, and
`components/`, `slurm/` and `jobs/`; nothing imports it.
"""
