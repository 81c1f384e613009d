"""The slurm-eks agent: the programs that run inside the cluster as one package and one image
(slurm/agent/Dockerfile), one entry point per agent (`python3 -m slurm.agent <agent>`).

`contract` is the one definition the Pulumi side (components/) and the agents share: settings documents,
metric names, labels and annotations, the accounts document. It is standard library only, and importing it
imports nothing else of the agent (this file stays empty of imports on purpose).
"""
