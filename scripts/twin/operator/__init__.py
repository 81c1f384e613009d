"""A port of what slurm-operator v1.2.1 (SlinkyProject) makes from a stack's Slinky objects, for the twin.

From the plan's Controller, NodeSets, LoginSet, RestApi, Accounting and ConfigMaps (Kubernetes dicts) it
gives the same text and pods the operator would: slurm.conf and cgroup.conf (slurmconf), slurmdbd.conf
(slurmdbd), each pod's /etc/slurm files (etcfiles), the pods with their containers, args, env, probes,
preStop hooks, volumes and labels (controller, worker, login, restapi, accounting; records in model) and the
Services (services). Every function names the upstream file and function it ports.

Modules: consts, confbuilder, names, labels, quantity, merge, model, scripts, common, hashes, slurmconf,
slurmdbd, controller, worker, login, restapi, accounting, services, etcfiles.
"""
