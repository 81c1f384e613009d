"""Namespaces and what separates them: each namespace with its Pod Security labels, ready before anything runs
in it (namespaces.py, segmented_namespaces.py), and the NetworkPolicies that deny by default and allow each flow
(network_policies.py, label_selectors.py).

Imports components.config, components.lifecycle and components.names; network_policies.py names ports and pods of
components.slinky and components.addons: known loops, listed in pyproject.toml's `loops` contract.
"""
