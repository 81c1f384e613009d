"""`slurm-eks advise`: which parallel layout, how many nodes and which job script for a model on a partition.

`models.py` names the model (a preset of jobs/training/presets.py or a shape), `hardware.py` reads a
partition's devices from the stack and the instance catalog, `memory.py` holds the memory-per-device
formulas and the constants they rest on, and `advisor.py` searches the layouts the decision matrix allows
and builds the `slurm-eks job render` command. Pure functions returning dataclasses; errors are
`AdviseError`; never `scripts.cli`, typer or rich.
"""
