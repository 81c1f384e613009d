"""Dense bf16 peak of one accelerator chip, FLOP/s (no sparsity): what MFU is measured against (jobs/training/
metrics.py, on the device) and estimated against (scripts/advise, offline). Torch-free for the latter.

NVIDIA's A100, H100 SXM, H200 and A10 datasheets (their sparse figure halved); Trainium's "190 FP16/BF16/cFP8/
TF32 TFLOPS" per chip (aws-neuron/aws-neuron-sdk about-neuron/arch/neuron-hardware/trainium.rst), Trainium2's
"667 BF16/FP16/TF32 TFLOPS" per chip (trainium2.rst). Keys are the catalog's accelerator models
(components/catalog.py), which also appear in torch.cuda.get_device_name().
"""

from __future__ import annotations

PEAK_BF16_FLOPS: dict[str, float] = {
    "A100": 312e12, "H100": 989e12, "H200": 989e12, "A10G": 125e12, "Trainium": 190e12, "Trainium2": 667e12,
}
