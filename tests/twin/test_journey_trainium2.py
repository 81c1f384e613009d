"""The researcher's journey on a Trainium2 partition: `job render` with its defaults gives the TorchNeuron job
(docs/trainium.md), which runs on the twin through the same seams as every other partition (the operator's
slurm.conf, Slinky's entrypoints, the NetworkPolicies, pyxis), in the TorchNeuron image's environment: torch 2.13
with torch_neuronx's CPU stand-in serving the `neuron` process-group backend (scripts/twin/cluster.py
torchneuron_training). No shipped stack has a trn2 partition (docs/trainium.md says why), so this twin is dev's
with its partition replaced by one (tests/twin/conftest.py TRAINIUM2).

What only a trn2 node shows is listed in docs/trainium.md: the device, its collectives, the compiler, memory."""

from __future__ import annotations

import pytest

from scripts.twin.cluster import Twin
from tests.twin.conftest import TRAINIUM2, VARIANT_STACKS, VARIANT_USERS
from tests.twin.researcher import TRAIN, Researcher
from tests.twin.test_journey import SHAPE, STEPS, neuron_partitions, reference_hash, requeue_journey

pytestmark = [pytest.mark.twin]


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("stack_twin", [TRAINIUM2], indirect=True)
def test_a_trainium2_partition_trains_on_torchneuron_through_a_requeue_to_the_reference(
    stack_twin: tuple[str, Twin],
) -> None:
    stack, twin = stack_twin
    assert neuron_partitions(twin) == {"trainium"}, "the NodeSet asks the Neuron device plugin for its devices"
    person = Researcher(twin, VARIANT_USERS[stack], stack, stacks_dir=VARIANT_STACKS)
    args = (*STEPS[True], *SHAPE)
    # No --device: the rendered script picks TorchNeuron (SLURM_EKS_DEVICE=neuron), as on the cluster.
    job, logged = requeue_journey(twin, person, "trainium", [str(TRAIN), *args], one_worker_a_node=True)
    starts = [e for e in logged if e.get("event") == "start"]
    # Both runs (the first and the requeued one) trained through TorchNeuron's `neuron` backend.
    assert len(starts) == 2 and all(s["runtime"] == "neuron" and s["backend"] == "cpu:neuron" for s in starts), (
        f"{job.where}: not on the TorchNeuron code path: {starts}")
    (done,) = [e for e in logged if e.get("event") == "done"]
    assert done["params_sha256"] == reference_hash(int(starts[0]["world_size"]), args, torchneuron=True), (  # type: ignore[arg-type]
        f"{job.where}: the resumed run's parameters differ from an uninterrupted TorchNeuron run's")
