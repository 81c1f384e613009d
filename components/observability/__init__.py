"""Grafana, the alert rules and the accelerator exporters (dcgm-exporter, neuron-monitor) for the Slurm
nodes: the metric catalog every dashboard and rule names, the dashboards, and Grafana's CloudWatch data source.

Layer: above slinky (the state StorageClass, the node-health settings), compute, kubernetes, aws and config.
"""
