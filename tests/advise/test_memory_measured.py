"""advise's activation widths (scripts/advise/memory.py) against what autograd really keeps for backward: the
tensors saved by a real layer of jobs/training/model.py in bf16 on the CPU, counted through saved-tensor hooks
(each storage once, parameters and the rope tables left out). The CPU runs RMSNorm as torch's composite, which
keeps an fp32 copy of its input and its fp32 output (8h and an fp32 rstd) where the fused kernel the model counts
keeps the bf16 input and output (4h): 6h + 4 bytes more a norm, two norms a layer, and nothing else apart."""

from __future__ import annotations

import pytest

from tests.conftest import require_module

torch = require_module("torch", "pip install -e '.[jobs]': the training tests need it")

from jobs.training.config import ModelConfig  # noqa: E402
from jobs.training.model import Transformer  # noqa: E402
from jobs.training.presets import ModelShape  # noqa: E402
from scripts.advise.memory import CHECKPOINTED_WIDTH_H, Layout, layer_activation_bytes, memory  # noqa: E402

pytestmark = pytest.mark.torch

SHAPE = ModelShape(dim=256, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=768, vocab_size=512)
B, T = 3, 96  # 288 tokens: apart from every width, so no two tensors could be mistaken for each other
CPU_NORMS = 2 * (6 * SHAPE.dim + 4)


def model(**kw: object) -> Transformer:
    torch.manual_seed(0)
    m = Transformer(ModelConfig(SHAPE, T, 0.0)).to(torch.bfloat16)
    for name, value in kw.items():
        setattr(m, name, value)
    return m


def saved_bytes_per_token(m: Transformer, run: object) -> float:
    """Bytes of every tensor autograd saves while `run()` runs, per token, each storage once."""
    skip = {p.untyped_storage().data_ptr() for p in m.parameters()}
    skip |= {b.untyped_storage().data_ptr() for b in m.buffers()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()  # type: ignore[operator]
    return sum(seen.values()) / (B * T)


def test_a_layer_keeps_what_the_model_counts() -> None:
    m = model()
    x = torch.randn(B, T, SHAPE.dim, dtype=torch.bfloat16, requires_grad=True)
    measured = saved_bytes_per_token(m, lambda: m.layers["0"](x, m.rope_cos, m.rope_sin))
    assert measured == layer_activation_bytes(SHAPE, 1) + CPU_NORMS  # 16h + 8f + 4a: 10,256 bytes, measured 13,336


def test_checkpointed_layers_keep_their_input_only() -> None:
    idx = torch.randint(0, SHAPE.vocab_size, (B, T))
    kept = {}
    for name, kw in {"none": {}, "full": {"activation_checkpointing": True},
                     "every 2nd": {"activation_checkpointing": True, "ac_every": 2}}.items():
        m = model(**kw)
        kept[name] = saved_bytes_per_token(m, lambda m=m: m(idx, idx))
    layer = layer_activation_bytes(SHAPE, 1) + CPU_NORMS
    # the embedding and the head keep the same in all three; each recomputed layer keeps 2h instead of its set
    assert kept["none"] - kept["full"] == 4 * (layer - CHECKPOINTED_WIDTH_H * SHAPE.dim)
    assert kept["none"] - kept["every 2nd"] == 2 * (layer - CHECKPOINTED_WIDTH_H * SHAPE.dim)


def test_the_memory_model_counts_every_nth_layer() -> None:
    layout = Layout(nodes=1, data="FSDP", dp_shard=8, dp_replicate=1, micro_batch=1, grad_accum=1,
                    activation_checkpointing=True)
    full = memory(SHAPE, layout, T, 80).activations
    half = memory(SHAPE, Layout(**{**layout.__dict__, "ac_every": 2}), T, 80).activations
    plain = memory(SHAPE, Layout(**{**layout.__dict__, "activation_checkpointing": False}), T, 80).activations
    per_layer = T * (layer_activation_bytes(SHAPE, 1) - CHECKPOINTED_WIDTH_H * SHAPE.dim) / 2**30
    assert half - full == pytest.approx(2 * per_layer)
    assert full < half < plain  # the rebuilt layer is counted once in both checkpointed figures
