"""Llama-3 model shapes by name, with the parameter and FLOP counts that MFU and `slurm-eks advise` use.

No torch here: `slurm-eks advise` runs on the login pod and in CI without it. The shapes are torchtitan's
(pytorch/torchtitan `torchtitan/models/llama3/__init__.py`: debugmodel, 1B, 8B, 70B, 405B), the SwiGLU width
rule is its `compute_ffn_hidden_dim` (`torchtitan/models/common/feed_forward.py`), and the FLOP count is its
`get_dense_model_nparams_and_flops` (`torchtitan/models/utils.py`): 6 x matmul parameters plus
6 x layers x heads x (q/k + v head dims) x sequence length for attention, causal sparsity not discounted.
"""

from __future__ import annotations

from dataclasses import dataclass

NORM_EPS = 1e-5
ROPE_THETA = 500000.0


def ffn_hidden_dim(dim: int, multiple_of: int, multiplier: float | None = None) -> int:
    """SwiGLU width: 2/3 of 4 x dim, times the multiplier, rounded up to a multiple (torchtitan)."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's RoPE frequency scaling ("rope_type": "llama3"): wavelengths longer than the original context /
    low_freq_factor are stretched by `factor`, shorter than it / high_freq_factor kept, those between blended
    (meta-llama/llama-models `apply_scaling`; transformers 5.23 modeling_rope_utils `_compute_llama3_parameters`).
    Meta's 3.1 and 3.2 releases: factor 8 (32 for 3.2), 1, 4, 8192."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192


@dataclass(frozen=True)
class ModelShape:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int
    tie_embeddings: bool = False
    # Llama 3's; a released model's own come from its config (jobs/training/released.py).
    rope_theta: float = ROPE_THETA
    rope_scaling: RopeScaling | None = None
    norm_eps: float = NORM_EPS

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def problems(self) -> list[str]:
        """What makes the shape unbuildable, as `field: why` (empty when fine)."""
        found = []
        if self.dim % self.n_heads:
            found.append(f"dim {self.dim} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            found.append(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            found.append(f"head dim {self.head_dim} is odd: rotary embeddings rotate pairs")
        return found

    def layer_params(self) -> int:
        """One block: q and o (dim x dim), k and v (dim x kv_heads x head_dim), SwiGLU's three, two RMSNorms."""
        kv = self.n_kv_heads * self.head_dim
        return 2 * self.dim * self.dim + 2 * self.dim * kv + 3 * self.dim * self.ffn_dim + 2 * self.dim

    def embedding_params(self) -> int:
        return self.vocab_size * self.dim

    def params(self) -> int:
        """Every parameter, the tied embedding counted once (as model.parameters() does)."""
        output = 0 if self.tie_embeddings else self.vocab_size * self.dim
        return self.embedding_params() + self.n_layers * self.layer_params() + self.dim + output

    def flops_per_token(self, seq_len: int) -> int:
        """Training FLOPs per token (forward + backward), torchtitan's dense-model formula: the input embedding
        is a lookup, not a matmul, unless it is tied to the output projection."""
        matmul = self.params() if self.tie_embeddings else self.params() - self.embedding_params()
        return 6 * matmul + 6 * self.n_layers * self.n_heads * 2 * self.head_dim * seq_len


LLAMA3_VOCAB = 128256
PRESETS: dict[str, ModelShape] = {
    "debug": ModelShape(dim=256, n_layers=6, n_heads=16, n_kv_heads=16, ffn_dim=ffn_hidden_dim(256, 256),
                        vocab_size=2048),
    "llama3-1b": ModelShape(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8,
                            ffn_dim=ffn_hidden_dim(2048, 1024, 1.5), vocab_size=LLAMA3_VOCAB, tie_embeddings=True),
    "llama3-8b": ModelShape(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8,
                            ffn_dim=ffn_hidden_dim(4096, 1024, 1.3), vocab_size=LLAMA3_VOCAB),
    "llama3-70b": ModelShape(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8,
                             ffn_dim=ffn_hidden_dim(8192, 4096, 1.3), vocab_size=LLAMA3_VOCAB),
    "llama3-405b": ModelShape(dim=16384, n_layers=126, n_heads=128, n_kv_heads=8,
                              ffn_dim=ffn_hidden_dim(16384, 4096, 1.2), vocab_size=LLAMA3_VOCAB),
}
