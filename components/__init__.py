"""The Pulumi components and the typed stack config they take, by concern, each package a layer that imports
only from the layers below it (pyproject.toml's `components-layers` contract), bottom to top:

- root modules: `catalog` (instance facts), `names`, `findings` and `findings_render` (the one finding type and
  its renderers), `upstream` (pinned upstream files, sha256-checked);
- `config`: the typed stack config, its rules and validation (no Pulumi);
- `aws`: VPC, EKS, add-ons, IAM;
- `kubernetes`: namespaces and Pod Security, Helm releases, gitops' handover;
- `storage` | `compute`: FSx and EFS | scheduling, Karpenter, device plugins;
- `slinky`: Slurm through Slinky's operator (slurm.conf, the CRs, accounts, identity, the accounting database);
- `observability`: Grafana, alert rules, exporters, dashboards;
- `lifecycle` | `addons`: KEDA scaling and the node lifecycle controller | gitops, JupyterHub, batch operators;
- `segmentation`: the NetworkPolicies and the namespaces created with them;
- `program`: the whole cluster from one validated config.
"""
