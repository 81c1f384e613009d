"""The catalog restates our own exporter's names (components/ cannot import slurm/): it must match exactly."""

from __future__ import annotations

from components.observability.metric_catalog import ALL_NAMES, EXPORTERS, SLURM_EKS
from slurm.agent import contract as metric_names


def test_our_names_and_labels_match_the_controller() -> None:
    assert SLURM_EKS.names == {m.name for m in metric_names.ALL}
    assert set(SLURM_EKS.labels) == {label for m in metric_names.ALL for label in m.labels}


def test_every_exporter_cites_its_source_and_no_name_is_claimed_twice() -> None:
    assert all(e.source and e.names for e in EXPORTERS)
    assert sum(len(e.names) for e in EXPORTERS) == len(ALL_NAMES)
