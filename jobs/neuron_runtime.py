"""Which PyTorch runtime a Trainium job trains through, from the partition's chips and image: TorchNeuron (native,
`--device neuron`) where it runs, else the legacy torch-xla path (`--device xla`). One definition for `job render`,
`advise` and the Kubernetes templates.

From the Neuron documentation:
- TorchNeuron, the native backend (torch-neuronx 2.13/2.14, public from Neuron 2.33.0, 2026-10-19): "It is supported
  on Trainium 2 (trn2) and Trainium 3 (trn3) instances" (torch/index.html); DDP, FSDP2, DTensor tensor and sequence
  parallelism and pipeline parallelism through the `neuron` backend.
- PyTorch/XLA: "Starting with Neuron Release 2.30.0, PyTorch/XLA is no longer supported for training workloads on
  Trainium. PyTorch 2.9 was the last version based on the PyTorch/XLA backend for training"
  (about-neuron/announcements/neuron2.x/announce-no-support-pytorch-xla-training.rst); its training DLC,
  `pytorch-training-neuronx`, "is no longer published" from 2.31 (announce-no-longer-publish-pytorch-training-dlc.rst).
  So trn1, which TorchNeuron does not run on, trains through torch-xla on an image of Neuron 2.29 or earlier.
"""

from __future__ import annotations

from typing import Literal

NeuronRuntime = Literal["native", "xla"]
RUNTIMES: tuple[NeuronRuntime, ...] = ("native", "xla")
# The catalog's accelerator_model of the chips TorchNeuron runs on (components/catalog.py).
NATIVE_CHIPS = frozenset({"Trainium2", "Trainium3"})
# The torch-xla line's training DLC repository (aws-neuron/deep-learning-containers README, pytorch-training-neuronx):
# an image from it is the XLA runtime whatever the chip.
XLA_IMAGE_REPOSITORY = "public.ecr.aws/neuron/pytorch-training-neuronx"
DEVICE: dict[NeuronRuntime, str] = {"native": "neuron", "xla": "xla"}  # jobs/train.py --device
WHAT: dict[NeuronRuntime, str] = {
    "native": "TorchNeuron (torch-neuronx 2.13+, Neuron 2.33+)",
    "xla": "the legacy torch-xla path (torch-neuronx 2.9, images of Neuron 2.29 or earlier)",
}


class NeuronRuntimeError(ValueError):
    """A runtime the partition's chips or image cannot train with."""


def default_runtime(chip: str, image: str | None) -> NeuronRuntime:
    """TorchNeuron where the chip runs it, unless the image is of the XLA line."""
    if chip in NATIVE_CHIPS and not (image or "").startswith(XLA_IMAGE_REPOSITORY + ":"):
        return "native"
    return "xla"


def check_runtime(runtime: str, chip: str, where: str) -> NeuronRuntime:
    """`runtime` if `chip` can train with it; `where` names the partition in the error."""
    if runtime not in RUNTIMES:
        raise NeuronRuntimeError(f"--neuron-runtime {runtime!r}: use one of {', '.join(RUNTIMES)}")
    if runtime == "native" and chip not in NATIVE_CHIPS:
        raise NeuronRuntimeError(
            f"--neuron-runtime native: {where} has {chip} chips, and TorchNeuron runs on Trainium2 and Trainium3 "
            "only (Neuron docs, torch/index.html); drop the option (trn1 trains through torch-xla) or use a trn2 "
            "partition"
        )
    return runtime  # type: ignore[return-value]
