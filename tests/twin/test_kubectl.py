"""The twin's kubectl answers the two commands the change gate sends and refuses anything else (the journeys that
use it against a running twin: tests/twin/test_journey_day_two.py)."""

from __future__ import annotations

import pytest

from scripts.change.cluster_facts import FactsUnavailable
from scripts.twin import kubectl
from scripts.twin.cluster import Twin


def test_only_get_pods_and_exec_are_answered() -> None:
    run = kubectl.runner(Twin.__new__(Twin))
    with pytest.raises(FactsUnavailable, match=r"does not answer kubectl apply -f x\.yaml"):
        run(["kubectl", "apply", "-f", "x.yaml"])
