"""Node health: the checks slurmd runs on every accelerator node (node-check.sh: HealthCheckProgram, Prolog,
Epilog), the repair controller that has Karpenter replace nodes those checks drained, and the active checks
(NCCL / Neuron collective bandwidth) it schedules on idle nodes.

Everything that drains a node for a machine reason writes a reason in one format (reasons.py), so the
controller can tell a node the checks drained from one a person drained (which it never touches).
"""
