"""What separates the namespaces: the NetworkPolicies that deny by default and allow each flow
(network_policies.py, naming every component's pods and ports), and `SegmentedNamespaces`, the implementation of
components.kubernetes.namespaces.Namespaces that creates each namespace with its policies before anything runs
in it.

Layer: the top but for program.py: it imports every package whose flows it allows, and only the program
imports it.
"""
