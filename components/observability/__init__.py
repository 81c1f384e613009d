"""Grafana, the alert rules and the accelerator exporters (dcgm-exporter, neuron-monitor) for the Slurm
nodes: the metric catalog every dashboard and rule names, the dashboards, and Grafana's CloudWatch data source.

Imports components.aws, components.compute, components.config, components.lifecycle, components.segmentation and
components.slinky (the chart pins, the state StorageClass): the last a known loop, listed in pyproject.toml's
`loops` contract.
"""
