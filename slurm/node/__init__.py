"""What Slurm's own nodes run, in Slinky's images rather than the agent's: node-check.sh, the slurmd pods'
HealthCheckProgram and the Controller's Prolog and Epilog. Slinky's API takes prolog and epilog scripts only as
ConfigMaps (Controller prologScriptRefs/epilogScriptRefs, slurm-operator v1.2.1 api/v1beta1/controller_types.go),
so this one script is the code the plan's ConfigMaps still carry (components/slinky/node_health.py)."""
