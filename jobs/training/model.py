"""Llama-style decoder: RMSNorm, rotary embeddings, grouped-query SDPA attention, SwiGLU, no biases.

Names are those of Meta's Llama code (torchtitan's before it fused q/k/v): `tok_embeddings`, `layers`, `norm`,
`output`; each layer `attention_norm`, `attention` (`wq`, `wk`, `wv`, `wo`), `ffn_norm`, `feed_forward`
(`w1`, `w2`, `w3`). As in torchtitan's decoder (pytorch/torchtitan `torchtitan/models/common/decoder.py`),
`layers` is a ModuleDict keyed "0".."n-1", so a pipeline stage deletes layers and keeps every name, and
`tok_embeddings`, `norm` and `output` may be None. Rotary embeddings are RoPE (with Llama 3.1's frequency
scaling when the shape has it: a released 3.1 model's does, our presets do not) on adjacent pairs, as
torchtitan's `ComplexRoPE` rotates them,
but from real cos/sin tables: no complex tensors, for torch-xla and DTensor.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor
from torch.utils.checkpoint import checkpoint

from jobs.training.config import ModelConfig
from jobs.training.presets import ROPE_THETA, ModelShape, RopeScaling

# Elements drawn per generator when a parameter is initialised (16 MiB of fp32).
INIT_BLOCK_ELEMENTS = 4 * 1024 * 1024


def parameter_seed(seed: int, name: str) -> int:
    """A generator seed for one parameter (or block of one): CRC-32 of the run's seed and the name, the same in
    every process (unlike Python's salted hash). 32 bits because the CPU generator keeps no more of a seed
    (torch 2.13: seeds that differ above bit 31 drew the same numbers)."""
    return zlib.crc32(f"{seed}/{name}".encode())


def rope_tables(head_dim: int, seq_len: int, theta: float = ROPE_THETA,
                scaling: RopeScaling | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position x frequency, each [seq_len, head_dim / 2], in fp32; with Llama 3.1's frequency
    scaling when given (RopeScaling, as transformers' `_compute_llama3_parameters` computes it)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    if scaling is not None:
        old = scaling.original_max_position
        low_wavelen, high_wavelen = old / scaling.low_freq_factor, old / scaling.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq)
        smooth = (old / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor)
        blended = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv_freq = torch.where(medium, blended, scaled)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent pair (x[2i], x[2i+1]) of x [B, T, heads, head_dim] by position x frequency i;
    in fp32 when x is bf16, as torchtitan does, then back to x's dtype."""
    even, odd = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = cos[:, None, :], sin[:, None, :]  # broadcast over heads
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, shape: ModelShape, dropout: float) -> None:
        super().__init__()
        self.head_dim = shape.head_dim
        self.dropout = dropout
        self.wq = nn.Linear(shape.dim, shape.n_heads * shape.head_dim, bias=False)
        self.wk = nn.Linear(shape.dim, shape.n_kv_heads * shape.head_dim, bias=False)
        self.wv = nn.Linear(shape.dim, shape.n_kv_heads * shape.head_dim, bias=False)
        self.wo = nn.Linear(shape.n_heads * shape.head_dim, shape.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [B, T, dim]; cos and sin: the model's whole tables, cut to T here, where the sequence is whole
        also under sequence parallelism (the residual stream outside attention may hold a piece of it)."""
        b, t, _ = x.shape
        cos, sin = cos[:t], sin[:t]
        # Head counts from the tensors, not the shape, so a tensor-parallel shard (fewer heads) runs as is.
        q = apply_rope(self.wq(x).view(b, t, -1, self.head_dim), cos, sin)
        k = apply_rope(self.wk(x).view(b, t, -1, self.head_dim), cos, sin)
        v = self.wv(x).view(b, t, -1, self.head_dim)
        repeats = q.shape[2] // k.shape[2]
        if repeats > 1:  # grouped-query: query head h reads kv head h // repeats
            k, v = k.repeat_interleave(repeats, dim=2), v.repeat_interleave(repeats, dim=2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=True,
        )
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, shape: ModelShape, dropout: float) -> None:
        super().__init__()
        self.attention_norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.attention = Attention(shape, dropout)
        self.ffn_norm = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.feed_forward = FeedForward(shape.dim, shape.ffn_dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        h = x + self.drop(self.attention(self.attention_norm(x), cos, sin))
        return h + self.drop(self.feed_forward(self.ffn_norm(h)))


class Transformer(nn.Module):
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, cfg: ModelConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        shape = cfg.shape
        self.tok_embeddings: nn.Embedding | None = nn.Embedding(shape.vocab_size, shape.dim)
        self.layers = nn.ModuleDict({str(i): TransformerBlock(shape, cfg.dropout) for i in range(shape.n_layers)})
        self.norm: nn.RMSNorm | None = nn.RMSNorm(shape.dim, eps=shape.norm_eps)
        self.output: nn.Linear | None = nn.Linear(shape.dim, shape.vocab_size, bias=False)
        if shape.tie_embeddings:
            self.tok_embeddings.weight = self.output.weight
        # Not persistent: recomputed from the shape, so checkpoints hold parameters only.
        half = shape.head_dim // 2
        self.register_buffer("rope_cos", torch.empty(cfg.seq_len, half), persistent=False)
        self.register_buffer("rope_sin", torch.empty(cfg.seq_len, half), persistent=False)
        # Recompute layers' activations in backward instead of storing them (set by parallelize): every
        # `ac_every`-th layer (1: every layer, full checkpointing; N: torchtitan's layer-level selective
        # checkpointing, `selective_ac_option` N), counted by the layer's id in the whole model.
        self.activation_checkpointing = False
        self.ac_every = 1
        self.init_weights(seed)

    @torch.no_grad()
    def init_weights(self, seed: int = 0) -> None:
        """Every parameter set to its initial value (initial_value) and the rope tables filled, in place: what
        a model built whole on one device starts from. A model built on the meta device and laid out over a
        mesh gets the same numbers, shard by shard (jobs/training/materialize.py)."""
        for name, param in self.named_parameters():
            param.copy_(self.initial_value(name, tuple(param.shape), param.device, seed))
        self.init_buffers()

    def init_buffers(self) -> None:
        if self.rope_cos.is_meta:
            return
        shape = self.cfg.shape
        cos, sin = rope_tables(shape.head_dim, self.cfg.seq_len, shape.rope_theta, shape.rope_scaling)
        self.rope_cos, self.rope_sin = cos.to(self.rope_cos.device), sin.to(self.rope_sin.device)

    def initial_value(self, name: str, size: tuple[int, ...], device: torch.device, seed: int) -> torch.Tensor:
        """The whole tensor parameter `name` starts from, drawn in blocks of rows from generators seeded by (seed,
        name, block) alone, so it is the same whichever rank, layout or pipeline stage asks, and in any order.

        torchtitan's llama3 init (`torchtitan/models/llama3/__init__.py`: `_LINEAR_INIT`, `_depth_init`,
        `_EMBEDDING_INIT`, `_output_linear_init`, `_NORM_INIT`; `depth_scaled_std` in
        `torchtitan/models/common/param_init.py`): wq, wk, wv, w1 trunc_normal(std 0.02); wo, w2, w3
        trunc_normal(std 0.02 / sqrt(2 (layer_id + 1))); embeddings normal(std 1); output
        trunc_normal(std dim^-0.5, cut at 3 std), which a tied embedding takes instead of its own; norms 1.
        The layer id is the key in `layers`, so a stage holding layers "8".."15" inits them as the whole model."""
        if device.type == "meta":
            return torch.empty(size, device=device)
        if device.type not in ("cpu", "cuda"):  # xla, neuron: drawn on the CPU, copied by the caller
            device = torch.device("cpu")
        value = torch.empty(size, device=device)
        if name.endswith("norm.weight"):
            return value.fill_(1.0)
        draw = self._distribution(name)
        # In blocks of rows, each from a generator of its own: nn.init.trunc_normal_ holds about 5 times its
        # tensor in temporaries (torch 2.13, CPU: +693 MB for a 131 MB matrix), so a whole vocab x dim matrix at
        # once would cost more than the shard it is drawn for.
        rows = max(1, INIT_BLOCK_ELEMENTS // max(1, value[0].numel()))
        for block, start in enumerate(range(0, size[0], rows)):
            generator = torch.Generator(device=device).manual_seed(parameter_seed(seed, f"{name}#{block}"))
            draw(value[start : start + rows], generator)
        return value

    def _distribution(self, name: str) -> Callable[[torch.Tensor, torch.Generator], torch.Tensor]:
        dim = self.cfg.shape.dim
        if name == "output.weight" or (name == "tok_embeddings.weight" and self.cfg.shape.tie_embeddings):
            std = dim**-0.5
            return lambda t, g: nn.init.trunc_normal_(t, std=std, a=-3 * std, b=3 * std, generator=g)
        if name == "tok_embeddings.weight":
            return lambda t, g: nn.init.normal_(t, std=1.0, generator=g)
        parts = name.split(".")  # layers.<id>.<attention|feed_forward>.<w>.weight
        if parts[0] == "layers" and len(parts) == 5 and parts[4] == "weight":
            if parts[3] in ("wq", "wk", "wv", "w1"):
                return lambda t, g: nn.init.trunc_normal_(t, std=0.02, generator=g)
            if parts[3] in ("wo", "w2", "w3"):
                depth_std = 0.02 / (2 * (int(parts[1]) + 1)) ** 0.5
                return lambda t, g: nn.init.trunc_normal_(t, std=depth_std, generator=g)
        raise KeyError(f"no initial value for parameter {name!r}")

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> Transformer:
        # Moving to a device of another tensor type (.to("xla"), to_empty() from meta) replaces each
        # parameter by a new one, which unties a tied embedding: tie it again.
        super()._apply(fn, recurse)
        embeddings, output = self.tok_embeddings, self.output
        if embeddings is not None and output is not None and self.cfg.shape.tie_embeddings:
            embeddings.weight = output.weight
        return self

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, V], or the mean cross-entropy (in fp32) when targets are given. A pipeline stage
        without `tok_embeddings` takes hidden states [B, T, dim]; one without `output` returns them."""
        t = idx.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence of {t} tokens exceeds seq_len {self.cfg.seq_len}")
        cos, sin = self.rope_cos, self.rope_sin
        h = self.tok_embeddings(idx) if self.tok_embeddings is not None else idx
        for key, layer in self.layers.items():
            if self.activation_checkpointing and (int(key) + 1) % self.ac_every == 0:
                h = checkpoint(layer, h, cos, sin, use_reentrant=False)
            else:
                h = layer(h, cos, sin)
        h = self.norm(h) if self.norm is not None else h
        if self.output is None:
            return h
        logits = self.output(h)
        if targets is None:
            # under tensor parallelism the logits are a DTensor sharded over the vocabulary: gather them
            return logits.full_tensor() if isinstance(logits, DTensor) else logits
        return self.cross_entropy(logits, targets)

    @staticmethod
    def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The mean cross-entropy in fp32. Vocabulary-sharded logits (tensor parallelism) are taken as they are,
        inside loss_parallel (jobs/training/tensor_parallel.py loss_context): each rank reduces its shard and the
        ranks all-reduce a max and a sum per token; the loss comes back replicated, as a plain tensor."""
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        return loss.full_tensor() if isinstance(loss, DTensor) else loss


def count_params(model: nn.Module) -> int:
    """Parameters as model.parameters() yields them: a tied embedding once."""
    return sum(p.numel() for p in model.parameters())
