"""Released Llama 3 / 3.1 / 3.2 weights in: a directory of safetensors in Hugging Face's layout (config.json,
`model.layers.N.self_attn.q_proj.weight`, ...) or Meta's (params.json and Meta's names, which are ours), read one
tensor at a time into the sharded model (jobs/training/materialize.py), so no rank holds more than its shards and
one whole tensor. Reading a release's config needs neither torch nor safetensors (jobs/train.py checks its flags
first).

Hugging Face's layout differs in more than names: its conversion script permutes the rows of wq and wk so that
RoPE rotates the two halves of each head (`rotate_half`) instead of adjacent pairs (transformers
`models/llama/convert_llama_weights_to_hf.py`, `permute`: view(heads, head_dim / 2, 2, dim).transpose(1, 2)).
Reading it back undoes that permutation. The shape, RoPE base and Llama 3.1 scaling and the norm epsilon come from
the model's own config: config.json (`rope_theta` and `rope_scaling`, or transformers 5's `rope_parameters`) or
params.json (`use_scaled_rope`, Meta's llama-models `apply_scaling`: factor 8, 1, 4, 8192).

Only dense Llama decoders: anything else in the config is refused with the key that says so. Meta's original
`consolidated.NN.pth` files are pickles, not safetensors: convert them first (this reads safetensors only).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jobs.training.presets import NORM_EPS, ROPE_THETA, ModelShape, RopeScaling, ffn_hidden_dim

if TYPE_CHECKING:
    import torch

# Meta's Llama 3.1 reference scaling (meta-llama/llama-models models/llama3/reference_impl/model.py apply_scaling).
META_31_SCALING = RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position=8192)
# Our parameter name, less the layer prefix -> Hugging Face's.
HF_LAYER_NAMES = {
    "attention.wq.weight": "self_attn.q_proj.weight",
    "attention.wk.weight": "self_attn.k_proj.weight",
    "attention.wv.weight": "self_attn.v_proj.weight",
    "attention.wo.weight": "self_attn.o_proj.weight",
    "feed_forward.w1.weight": "mlp.gate_proj.weight",
    "feed_forward.w3.weight": "mlp.up_proj.weight",
    "feed_forward.w2.weight": "mlp.down_proj.weight",
    "attention_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}
HF_OTHER_NAMES = {"tok_embeddings.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight",
                  "output.weight": "lm_head.weight"}  # fmt: skip


class ReleaseError(ValueError):
    """A directory that is not a release this reads, saying which file and key."""


@dataclass(frozen=True)
class Release:
    directory: Path
    layout: str  # "huggingface" or "meta"
    shape: ModelShape

    def source_name(self, name: str) -> str:
        """The tensor in the release that our parameter `name` is."""
        if self.layout == "meta":
            return name
        if name in HF_OTHER_NAMES:
            if name == "output.weight" and self.shape.tie_embeddings:
                return HF_OTHER_NAMES["tok_embeddings.weight"]
            return HF_OTHER_NAMES[name]
        _, layer, rest = name.split(".", 2)
        return f"model.layers.{layer}.{HF_LAYER_NAMES[rest]}"

    def to_ours(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """Undo Hugging Face's rotate_half permutation of wq and wk rows."""
        if self.layout == "meta" or not name.endswith(("attention.wq.weight", "attention.wk.weight")):
            return tensor
        heads = self.shape.n_heads if name.endswith("wq.weight") else self.shape.n_kv_heads
        rows, cols = tensor.shape
        return tensor.view(heads, 2, rows // heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def read_release(directory: Path) -> Release:
    """The release in `directory`: its layout and the model shape its config gives."""
    if (directory / "config.json").is_file():
        return Release(directory, "huggingface", _hf_shape(_json(directory / "config.json")))
    if (directory / "params.json").is_file():
        return Release(directory, "meta", _meta_shape(_json(directory / "params.json")))
    raise ReleaseError(f"{directory}: neither config.json (Hugging Face) nor params.json (Meta) is there")


class ReleasedWeights:
    """Whole tensors of a release by our parameter names, in fp32, read lazily from its safetensors files."""

    def __init__(self, release: Release) -> None:
        try:  # here, not above: the flags are checked without it, and only --init-from needs it
            from safetensors import safe_open
        except ImportError:
            raise ReleaseError("--init-from needs the safetensors package, which this image lacks: "
                               "pip install safetensors (or build the image with it)") from None

        self.release = release
        files = sorted(release.directory.glob("*.safetensors"))
        if not files:
            raise ReleaseError(f"{release.directory}: no *.safetensors files (Meta's consolidated .pth files are "
                               "pickles: convert them to safetensors first)")  # fmt: skip
        self._stack = ExitStack()
        self._where: dict[str, Any] = {}
        for file in files:
            handle = self._stack.enter_context(safe_open(str(file), framework="pt", device="cpu"))
            for key in handle.keys():  # noqa: SIM118 (safe_open handles are not mappings)
                self._where[key] = handle

    def close(self) -> None:
        self._stack.close()

    def names(self) -> Iterator[str]:
        return iter(self._where)

    def __call__(self, name: str, size: tuple[int, ...], device: torch.device) -> torch.Tensor:
        import torch

        source = self.release.source_name(name)
        if source not in self._where:
            raise ReleaseError(f"{self.release.directory}: no tensor {source!r} (for our {name!r}) in its "
                               f"safetensors files")  # fmt: skip
        tensor = self.release.to_ours(name, self._where[source].get_tensor(source).to(torch.float32))
        if tuple(tensor.shape) != size:
            raise ReleaseError(f"{self.release.directory}: {source!r} is {tuple(tensor.shape)}, the model's "
                               f"{name!r} is {size}: the config does not describe these weights")  # fmt: skip
        if device.type in ("cpu", "cuda"):
            tensor = tensor.to(device)
        return tensor


def _json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ReleaseError(f"{path}: {error}") from None
    if not isinstance(value, dict):
        raise ReleaseError(f"{path}: not a JSON object")
    return value


def _hf_shape(config: dict[str, Any]) -> ModelShape:
    where = "config.json"
    if config.get("model_type") != "llama":
        raise ReleaseError(f"{where}: model_type is {config.get('model_type')!r}; only dense Llama ('llama') loads")
    for key, wanted in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False)):
        if config.get(key, wanted) != wanted:
            raise ReleaseError(f"{where}: {key} is {config[key]!r}; the Llama decoder here has {wanted!r}")
    dim, heads = config["hidden_size"], config["num_attention_heads"]
    if config.get("head_dim") not in (None, dim // heads):
        raise ReleaseError(f"{where}: head_dim {config['head_dim']} is not hidden_size / num_attention_heads")
    rope = dict(config.get("rope_parameters") or {})  # transformers 5
    theta = rope.get("rope_theta", config.get("rope_theta", ROPE_THETA))
    scaling = config.get("rope_scaling") or (rope if rope.get("rope_type") not in (None, "default") else None)
    return ModelShape(
        dim=dim, n_layers=config["num_hidden_layers"], n_heads=heads,
        n_kv_heads=config.get("num_key_value_heads", heads), ffn_dim=config["intermediate_size"],
        vocab_size=config["vocab_size"], tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        rope_theta=float(theta), rope_scaling=_hf_scaling(scaling),
        norm_eps=float(config.get("rms_norm_eps", NORM_EPS)),
    )  # fmt: skip


def _hf_scaling(scaling: dict[str, Any] | None) -> RopeScaling | None:
    if not scaling:
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind != "llama3":
        raise ReleaseError(f"config.json: rope scaling {kind!r}; only Llama 3.1's ('llama3') is implemented")
    return RopeScaling(float(scaling["factor"]), float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"]),
                       int(scaling["original_max_position_embeddings"]))


def _meta_shape(params: dict[str, Any]) -> ModelShape:
    dim = params["dim"]
    ffn = ffn_hidden_dim(dim, params.get("multiple_of", 256), params.get("ffn_dim_multiplier"))
    return ModelShape(
        dim=dim, n_layers=params["n_layers"], n_heads=params["n_heads"],
        n_kv_heads=params.get("n_kv_heads") or params["n_heads"], ffn_dim=ffn, vocab_size=params["vocab_size"],
        tie_embeddings=False, rope_theta=float(params.get("rope_theta", ROPE_THETA)),
        rope_scaling=META_31_SCALING if params.get("use_scaled_rope") else None,
        norm_eps=float(params.get("norm_eps", NORM_EPS)),
    )  # fmt: skip
