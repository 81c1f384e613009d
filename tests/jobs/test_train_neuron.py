"""jobs/train.py on its Neuron code path (`--device neuron`, what the job script of a Trainium2/3 partition
selects: TorchNeuron, jobs/training/neuron.py) under real torchrun on TorchNeuron's torch line (2.13, this
repository's venv: the environment the twin gives a TorchNeuron job, scripts/twin/cluster.py torchneuron_training),
with the CPU stand-in of torch_neuronx (tests/standins): its `neuron` process-group backend carries every collective
of a tensor x FSDP layout, and its `neuron` torch.compile backend compiles the blocks.

What only a trn2 node shows (docs/trainium.md): the `neuron` device itself, its collectives over NeuronLink and
EFA, the Neuron compiler, device memory, and DCP on Neuron tensors.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts.twin.cluster import torchneuron_training
from tests.jobs import runs
from tests.jobs.runs import Run, once_at_step, stop_file

pytestmark = pytest.mark.torch

TORCHRUN, NATIVE_ENV = torchneuron_training()
PYTHON = str(TORCHRUN.with_name("python"))  # TorchNeuron's torch (2.13), not the legacy images' 2.9
WITH_STANDIN = {"PYTHONPATH": os.pathsep.join((str(runs.REPO), NATIVE_ENV["PYTHONPATH"]))}
LAYOUT = ["--fsdp", "--tp", "2", "--steps", "6", "--checkpoint-every", "4", "--warmup-steps", "2"]


def neuron_run(ckpt: Path, flags: list[str], nproc: int = 4, env: dict[str, str] | None = None,
               **kwargs: object) -> Run:
    return runs.torchrun(ckpt, ["--device", "neuron", *flags], nproc=nproc, python=PYTHON,
                         env={**WITH_STANDIN, **(env or {})},
                         timeout=300, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = neuron_run(tmp_path_factory.mktemp("reference") / "ckpt", LAYOUT)
    assert run.rc == 0, run.stderr[-3000:]
    return run


def test_a_tensor_by_fsdp_layout_trains_on_the_neuron_code_path(reference: Run) -> None:
    start = reference.last("start")
    # The runtime asked for, the stand-in's neuron backend for the (CPU) tensors, the 2-D layout.
    assert start["runtime"] == "neuron" and start["backend"] == "cpu:neuron", start
    assert start["parallelism"] == "fsdp2 dp_shard=2 tp=2", start
    losses = [float(e["loss"]) for e in reference.events if "loss" in e]  # type: ignore[arg-type]
    assert losses[-1] < losses[0], losses


def test_the_neuron_path_computes_in_bf16_like_an_accelerator_not_like_the_cpu(tmp_path: Path, reference: Run) -> None:
    """Same flags on `--device cpu` (fp32 throughout) end elsewhere: the Neuron run took the accelerator's choices
    (FSDP2's bf16 MixedPrecisionPolicy), not the CPU's."""
    cpu = runs.torchrun(tmp_path / "cpu", ["--device", "cpu", *LAYOUT], nproc=4, timeout=300, python=PYTHON)
    assert cpu.rc == 0, cpu.stderr[-3000:]
    assert cpu.last("start")["backend"] == "gloo"
    assert cpu.last("done")["params_sha256"] != reference.last("done")["params_sha256"]


def test_a_stop_checkpoints_and_the_resume_ends_bit_for_bit_where_an_uninterrupted_run_does(
    tmp_path: Path, reference: Run
) -> None:
    ckpt = tmp_path / "ckpt"
    stopped = neuron_run(ckpt, LAYOUT, on_event=once_at_step(2, lambda _: stop_file(ckpt).touch()))
    assert stopped.rc == 0 and stopped.last("preempted")["reasons"] == ["stop-file"], stopped.stderr[-3000:]
    resumed = neuron_run(ckpt, LAYOUT)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert resumed.last("resumed")["step"] == stopped.last("preempted")["step"]
    assert resumed.last("done")["params_sha256"] == reference.last("done")["params_sha256"]


def test_compile_goes_through_the_neuron_backend(tmp_path: Path) -> None:
    run = neuron_run(tmp_path / "ckpt", ["--compile", "--steps", "3", "--warmup-steps", "1"], nproc=1,
                     env={"SLURM_EKS_STANDIN_REPORT": "1"})
    assert run.rc == 0, run.stderr[-3000:]
    (report,) = [line for line in run.stderr.splitlines() if "torch_neuronx stand-in:" in line]
    assert "'process_groups': 1" in report and "'compiled_graphs': 0" not in report, report


def test_without_torchneuron_the_job_says_which_package_and_device_it_needs(tmp_path: Path) -> None:
    run = runs.torchrun(tmp_path / "ckpt", ["--device", "neuron", "--steps", "2", "--warmup-steps", "1"], nproc=1,
                        timeout=120, python=PYTHON)
    # torchrun reports the worker's exit with a traceback of its own; the worker printed the error alone.
    assert run.rc != 0 and "raise NeuronUnavailable" not in run.stderr, run.stderr[-3000:]
    assert "train.py: error: --device neuron needs TorchNeuron (pip torch-neuronx 2.13/2.14" in run.stderr
    assert "On trn1, or an image before Neuron 2.30, use --device xla" in run.stderr


def test_a_torch_neuronx_without_the_neuron_backend_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch-xla plugin of the same name registers no `neuron` process-group backend: say so, not train."""
    import torch.distributed as dist

    from jobs.training import neuron

    monkeypatch.setattr(neuron.importlib, "import_module", lambda name: None)
    monkeypatch.setattr(dist.Backend, "backend_capability", {"gloo": ["cpu"]})
    with pytest.raises(neuron.NeuronUnavailable, match="registered no 'neuron' process-group backend"):
        neuron.device_type()
    monkeypatch.setattr(dist.Backend, "backend_capability", {"neuron": ["neuron"]})
    assert neuron.device_type() == "neuron"
    assert neuron.process_group_backend("neuron") == "cpu:gloo,neuron:neuron"
