"""The switch tree built from the recorded instances."""

from __future__ import annotations

import dataclasses

import pytest

from slurm.agent.topology.instance_topology import InstanceTopology
from slurm.agent.topology.tree import ROOT, UNPLACED, Switch, build_tree, natural_key
from tests.topology import recorded


def test_leaves_are_the_bottom_layer_and_hold_the_slurm_nodes() -> None:
    tree = build_tree(recorded.instances(), recorded.one_node_each())
    assert tree.leaves() == {
        recorded.LEAF_135: ("tn1", "tn3", "tn5"),
        recorded.LEAF_7: ("tn7",),
        recorded.LEAF_24: ("tn2", "tn4"),
        recorded.LEAF_68: ("tn6", "tn8"),
        UNPLACED: ("tn9",),
    }


def test_the_layers_above_follow_the_node_sets() -> None:
    tree = build_tree(recorded.instances(), recorded.one_node_each())
    assert tree.switch(recorded.MID_ODD).switches == (recorded.LEAF_135, recorded.LEAF_7)
    assert tree.switch(recorded.MID_EVEN_1).switches == (recorded.LEAF_24,)
    assert tree.switch(recorded.MID_EVEN_2).switches == (recorded.LEAF_68,)
    assert tree.switch(recorded.SPINE_ODD).switches == (recorded.MID_ODD,)
    assert tree.switch(recorded.SPINE_EVEN).switches == (recorded.MID_EVEN_1, recorded.MID_EVEN_2)


def test_a_synthetic_root_joins_the_top_layer_and_the_unplaced_nodes() -> None:
    tree = build_tree(recorded.instances(), recorded.one_node_each())
    assert tree.root == ROOT
    assert tree.switches[-1] == Switch(ROOT, switches=(recorded.SPINE_ODD, recorded.SPINE_EVEN, UNPLACED))


def test_switches_are_listed_leaves_first_and_sorted_within_a_layer() -> None:
    names = [s.name for s in build_tree(recorded.instances(), recorded.one_node_each()).switches]
    assert names == [
        recorded.LEAF_135, recorded.LEAF_7, recorded.LEAF_24, recorded.LEAF_68,
        recorded.MID_ODD, recorded.MID_EVEN_1, recorded.MID_EVEN_2,
        recorded.SPINE_ODD, recorded.SPINE_EVEN, UNPLACED, ROOT,
    ]


def test_the_same_input_in_another_order_gives_the_same_tree() -> None:
    mapping = recorded.one_node_each()
    shuffled = dict(reversed(list(mapping.items())))
    assert build_tree(reversed(recorded.instances()), shuffled) == build_tree(recorded.instances(), mapping)


def test_reading_the_node_set_bottom_up_gives_a_different_tree_or_none() -> None:
    """Guards the layer order: bottom-up, the spine would be taken for the leaf (where the switches form a
    chain) or the branching switches would each get several parents (refused)."""
    flipped = [dataclasses.replace(i, network_nodes=i.network_nodes[::-1]) for i in recorded.instances()]
    with pytest.raises(ValueError, match="under both"):
        build_tree(flipped, recorded.one_node_each())
    chain = {recorded.instance_id(1): ["tn1"], recorded.instance_id(3): ["tn3"]}
    assert build_tree(recorded.instances(), chain).leaves() == {recorded.LEAF_135: ("tn1", "tn3")}
    assert build_tree(flipped, chain).leaves() == {recorded.SPINE_ODD: ("tn1", "tn3")}


def test_instances_without_a_record_hang_under_the_unplaced_switch() -> None:
    mapping = {**recorded.one_node_each(), "i-unknown": ["cpu-1"]}
    assert build_tree(recorded.instances(), mapping).leaves()[UNPLACED] == ("cpu-1", "tn9")


def test_two_pods_on_one_instance_share_its_leaf_and_instances_without_pods_are_left_out() -> None:
    mapping = {recorded.instance_id(2): ["gpu-0", "gpu-1"]}
    tree = build_tree(recorded.instances(), mapping)
    assert tree.leaves() == {recorded.LEAF_24: ("gpu-0", "gpu-1")}
    assert [s.name for s in tree.switches] == [recorded.LEAF_24, recorded.MID_EVEN_1, recorded.SPINE_EVEN, ROOT]


def test_no_unplaced_switch_when_every_instance_is_placed() -> None:
    mapping = recorded.one_node_each()
    del mapping[recorded.UNCOVERED]
    assert UNPLACED not in [s.name for s in build_tree(recorded.instances(), mapping).switches]


def test_a_slurm_node_on_two_instances_is_refused() -> None:
    with pytest.raises(ValueError, match="tn1 is on both"):
        build_tree(recorded.instances(), {recorded.instance_id(1): ["tn1"], recorded.instance_id(2): ["tn1"]})


def test_inconsistent_parents_are_refused() -> None:
    odd = InstanceTopology("i-x", "p5.48xlarge", "us-east-2b", ("nn-top2", recorded.MID_ODD, "nn-leaf-x"))
    with pytest.raises(ValueError, match="under both"):
        build_tree([*recorded.instances(), odd], {recorded.instance_id(1): ["a"], "i-x": ["b"]})


def test_a_node_that_is_both_leaf_and_inner_is_refused() -> None:
    short = InstanceTopology("i-x", "p5.48xlarge", "us-east-2b", (recorded.SPINE_ODD, recorded.MID_ODD))
    with pytest.raises(ValueError, match="leaves of some instances and above others"):
        build_tree([*recorded.instances(), short], {recorded.instance_id(1): ["a"], "i-x": ["b"]})


def test_no_nodes_no_tree() -> None:
    with pytest.raises(ValueError, match="no Slurm nodes"):
        build_tree(recorded.instances(), {})


def test_natural_order_of_node_names() -> None:
    assert sorted(["tn10", "tn9", "tn1"], key=natural_key) == ["tn1", "tn9", "tn10"]
