"""topology.conf and topology.yaml from the recorded instances' tree."""

from __future__ import annotations

import yaml

from slurm.agent.topology.render import flat_topology_yaml, render_topology_conf, render_topology_yaml
from slurm.agent.topology.tree import ROOT, UNPLACED, Switch, SwitchTree, build_tree
from tests.topology import recorded


def tree() -> SwitchTree:
    return build_tree(recorded.instances(), recorded.one_node_each())


def test_topology_conf_lines() -> None:
    lines = render_topology_conf(tree()).splitlines()
    assert lines[0].startswith("#")
    assert lines[1:] == [
        f"SwitchName={recorded.LEAF_135} Nodes=tn1,tn3,tn5",
        f"SwitchName={recorded.LEAF_7} Nodes=tn7",
        f"SwitchName={recorded.LEAF_24} Nodes=tn2,tn4",
        f"SwitchName={recorded.LEAF_68} Nodes=tn6,tn8",
        f"SwitchName={recorded.MID_ODD} Switches={recorded.LEAF_135},{recorded.LEAF_7}",
        f"SwitchName={recorded.MID_EVEN_1} Switches={recorded.LEAF_24}",
        f"SwitchName={recorded.MID_EVEN_2} Switches={recorded.LEAF_68}",
        f"SwitchName={recorded.SPINE_ODD} Switches={recorded.MID_ODD}",
        f"SwitchName={recorded.SPINE_EVEN} Switches={recorded.MID_EVEN_1},{recorded.MID_EVEN_2}",
        f"SwitchName={UNPLACED} Nodes=tn9",
        f"SwitchName={ROOT} Switches={recorded.SPINE_ODD},{recorded.SPINE_EVEN},{UNPLACED}",
    ]


def test_no_switch_line_has_both_nodes_and_switches() -> None:
    """Slurm refuses such a line ("switch %s has both child switches and nodes")."""
    for line in render_topology_conf(tree()).splitlines()[1:]:
        assert ("Nodes=" in line) != ("Switches=" in line), line


def _switches(document: list[dict]) -> dict[str, dict[str, str]]:
    (ours,) = [entry for entry in document if "tree" in entry]
    return {s["switch"]: {k: v for k, v in s.items() if k != "switch"} for s in ours["tree"]["switches"]}


def test_topology_yaml_structure() -> None:
    document = yaml.safe_load(render_topology_yaml(tree(), "ec2"))
    assert len(document) == 1 and next(iter(document[0])) == "topology"  # "Must be the first attribute"
    assert {k: v for k, v in document[0].items() if k != "tree"} == {"topology": "ec2", "cluster_default": True}
    switches = _switches(document)
    assert switches[recorded.LEAF_135] == {"nodes": "tn1,tn3,tn5"}
    assert switches[recorded.SPINE_EVEN] == {"children": f"{recorded.MID_EVEN_1},{recorded.MID_EVEN_2}"}
    assert switches[ROOT] == {"children": f"{recorded.SPINE_ODD},{recorded.SPINE_EVEN},{UNPLACED}"}
    assert switches[UNPLACED] == {"nodes": "tn9"}


def test_yaml_and_conf_describe_the_same_tree() -> None:
    switches = _switches(yaml.safe_load(render_topology_yaml(tree(), "ec2")))
    from_conf = {}
    for line in render_topology_conf(tree()).splitlines()[1:]:
        name, members = (field.split("=", 1) for field in line.split())
        from_conf[name[1]] = {"children" if members[0] == "Switches" else "nodes": members[1]}
    assert switches == from_conf


def test_names_stay_strings() -> None:
    odd = SwitchTree((Switch("on", nodes=("1e3", "yes")), Switch("root", switches=("on",))), "root")
    document = yaml.safe_load(render_topology_yaml(odd, "no"))
    assert document[0]["topology"] == "no"
    assert _switches(document) == {"on": {"nodes": "1e3,yes"}, "root": {"children": "on"}}


def test_before_any_node_the_cluster_default_is_flat() -> None:
    assert yaml.safe_load(flat_topology_yaml("ec2")) == [{"topology": "ec2", "cluster_default": True, "flat": True}]
