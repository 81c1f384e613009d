"""How the program installs into the cluster: each namespace's name and Pod Security level (namespaces.py, with
the `Namespaces` protocol components are given), Helm releases at pinned chart versions (charts.py) and gitops'
handover of them to Argo CD (handover.py), and what a label selector means (label_selectors.py).

Layer: above aws and config; storage, compute, slinky and everything above use it. The one `Namespaces`
implementation, which adds each namespace's NetworkPolicies, lives in components/segmentation, above them all.
"""
