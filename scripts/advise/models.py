"""The model to advise on: a preset of jobs/training/presets.py, or a shape given dimension by dimension."""

from __future__ import annotations

from dataclasses import dataclass

from components.config.problems import did_you_mean
from jobs.training.presets import LLAMA3_VOCAB, PRESETS, ModelShape, ffn_hidden_dim

# The SwiGLU width a custom shape gets without --ffn-dim: torchtitan's rule with Llama 2's multiple_of=256
# (jobs/training/presets.py ffn_hidden_dim; meta-llama/llama `llama/model.py` ModelArgs.multiple_of).
CUSTOM_FFN_MULTIPLE = 256
# How far --params may be from the count the shape flags give before they are taken to disagree: the
# difference a model's biases or an odd vocabulary padding makes is well under this.
PARAMS_TOLERANCE = 0.05


class AdviseError(ValueError):
    """A request that cannot be answered; the message says what to change."""


@dataclass(frozen=True)
class Model:
    name: str  # the preset's name, or "custom"
    shape: ModelShape
    preset: bool

    @property
    def params(self) -> int:
        return self.shape.params()


def preset_model(name: str) -> Model:
    if name not in PRESETS:
        hint = did_you_mean(name, PRESETS)
        raise AdviseError(f"no model preset {name!r}; {hint}presets: {', '.join(PRESETS)} "
                          "(or give a shape: --dim --layers --heads)")
    return Model(name, PRESETS[name], preset=True)


def custom_model(dim: int, layers: int, heads: int, kv_heads: int | None = None, ffn_dim: int | None = None,
                 vocab: int = LLAMA3_VOCAB, params: float | None = None) -> Model:
    """A Llama-style shape; `params`, when given, must agree with the count the shape gives."""
    shape = ModelShape(dim=dim, n_layers=layers, n_heads=heads, n_kv_heads=kv_heads or heads,
                       ffn_dim=ffn_dim or ffn_hidden_dim(dim, CUSTOM_FFN_MULTIPLE), vocab_size=vocab)
    if any(v < 1 for v in (dim, layers, heads, shape.n_kv_heads, shape.ffn_dim, vocab)):
        raise AdviseError("--dim, --layers, --heads, --kv-heads, --ffn-dim and --vocab must be positive")
    if problems := shape.problems():
        raise AdviseError(f"the shape cannot be built: {'; '.join(problems)}")
    counted = shape.params()
    if params is not None and abs(counted - params) > PARAMS_TOLERANCE * params:
        raise AdviseError(
            f"--params {params:.3g} but the shape gives {counted / 1e9:.2f}B parameters (dim {dim}, {layers} "
            f"layers, ffn {shape.ffn_dim}, vocab {vocab}): fix --ffn-dim, --vocab or --kv-heads, or drop --params"
        )
    return Model("custom", shape, preset=False)


def requested_model(preset: str | None, *, dim: int | None = None, layers: int | None = None,
                    heads: int | None = None, kv_heads: int | None = None, ffn_dim: int | None = None,
                    vocab: int | None = None, params: float | None = None) -> Model:
    """A preset by name, or a shape from its flags (--dim, --layers and --heads at least)."""
    shape_flags = {"--dim": dim, "--layers": layers, "--heads": heads, "--kv-heads": kv_heads,
                   "--ffn-dim": ffn_dim, "--vocab": vocab, "--params": params}
    given = [flag for flag, value in shape_flags.items() if value is not None]
    if preset is not None:
        if given:
            raise AdviseError(f"--model {preset} is a preset with its own shape: drop {' '.join(given)}")
        return preset_model(preset)
    if dim is None or layers is None or heads is None:
        missing = [flag for flag in ("--dim", "--layers", "--heads") if shape_flags[flag] is None]
        raise AdviseError(f"give --model PRESET ({', '.join(PRESETS)}) or a shape: {' '.join(missing)} missing")
    return custom_model(dim, layers, heads, kv_heads, ffn_dim, LLAMA3_VOCAB if vocab is None else vocab, params)
