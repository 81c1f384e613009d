"""A SwitchTree as Slurm reads it: topology.conf for the topology/tree plugin (Slurm 22.05 on the local
cluster reads this), and topology.yaml (Slurm 25.11, the production cluster).

Node and switch lists are plain comma lists: both files run them through Slurm's hostlist parser, for which
"tux[0-3,12]" and "a,b,c" name the same nodes (https://slurm.schedmd.com/topology.conf.html).
"""

from __future__ import annotations

import json

from slurm.agent.topology.tree import Switch, SwitchTree


def _conf_line(switch: Switch) -> str:
    # https://slurm.schedmd.com/topology.conf.html: "SwitchName=s0 Nodes=tux[0-3]", "SwitchName=s3 Switches=s[0-2]"
    if switch.switches:
        return f"SwitchName={switch.name} Switches={','.join(switch.switches)}"
    return f"SwitchName={switch.name} Nodes={','.join(switch.nodes)}"


def render_topology_conf(tree: SwitchTree) -> str:
    lines = ["# Generated from EC2 DescribeInstanceTopology by slurm-eks: leaf switches first, the root last."]
    lines += [_conf_line(switch) for switch in tree.switches]
    return "\n".join(lines) + "\n"


def _quoted(value: str) -> str:
    # A JSON string is a YAML double-quoted scalar: names such as "on" or "1e3" stay strings.
    return json.dumps(value)


def _yaml_switch(switch: Switch) -> list[str]:
    # https://slurm.schedmd.com/topology.yaml.html, tree: switches: [{switch:, children: | nodes:}]
    key, members = ("children", switch.switches) if switch.switches else ("nodes", switch.nodes)
    return [f"      - switch: {_quoted(switch.name)}", f"        {key}: {_quoted(','.join(members))}"]


def render_topology_yaml(tree: SwitchTree, name: str) -> str:
    """topology.yaml holding the tree as topology `name`, the cluster default ("The first topology defined with
    cluster_default: true will be used for partitions without an explicitly specified topology",
    https://slurm.schedmd.com/topology.yaml.html; `topology` must be each entry's first attribute, same page).
    Every NodeSet node is in the tree (those without EC2 topology under the unplaced switch, one leaf: placement
    there is as flat as without a topology), so no partition needs a Topology= of its own."""
    lines = ["# Generated from EC2 DescribeInstanceTopology by slurm-eks.", "---",
             f"- topology: {_quoted(name)}", "  cluster_default: true", "  tree:", "    switches:"]
    for switch in tree.switches:
        lines += _yaml_switch(switch)
    return "\n".join(lines) + "\n"


def flat_topology_yaml(name: str) -> str:
    """topology.yaml before any node is placed: the flat topology (the default when no topology is configured,
    same page, `flat`) as the cluster default."""
    return "\n".join(["# No Slurm node placed yet: flat (slurm-eks).", "---", f"- topology: {_quoted(name)}",
                      "  cluster_default: true", "  flat: true"]) + "\n"
