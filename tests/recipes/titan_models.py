"""Run by the torchtitan venv (.venv-titan): for each `module/config` on the command line, what torchtitan resolves
and builds (on the meta device), as one JSON line: the facts scripts/advise/moe.py's presets state."""

from __future__ import annotations

import json
import sys

import torch
from torchtitan.config import ConfigManager

CHECKPOINTING = {"SelectiveAC": "selective", "FullAC": "full"}


def facts(module: str, config_name: str) -> dict[str, object]:
    config = ConfigManager().parse_args(["--module", module, "--config", config_name])
    with torch.device("meta"):
        model = config.model_spec.model.build()
    named = dict(model.named_parameters())
    moe_keys = [k for k, layer in model.layers.items() if getattr(layer, "moe", None) is not None]
    dense_keys = [k for k in model.layers if k not in moe_keys]
    moe = model.layers[moe_keys[0]].moe
    experts, ffn, dim = named[f"layers.{moe_keys[0]}.moe.routed_experts.inner_experts.w1_EFD"].shape
    shared = named.get(f"layers.{moe_keys[0]}.moe.shared_experts.w1.weight")
    dense = named.get(f"layers.{dense_keys[0]}.feed_forward.w1.weight") if dense_keys else None
    return {
        "flavor": config.model_spec.flavor,
        "params": sum(p.numel() for p in named.values()),
        "routed_params": sum(p.numel() for n, p in named.items() if ".routed_experts." in n),
        "layers": len(model.layers), "moe_layers": len(moe_keys), "dim": dim,
        "attention_width": named[f"layers.{moe_keys[0]}.attention.wo.weight"].shape[1],
        "heads": model.layers[moe_keys[0]].attention.n_heads,
        "vocab": named["tok_embeddings.weight"].shape[0],
        "experts": experts, "top_k": moe.router.top_k, "expert_ffn": ffn,
        "shared_ffn": shared.shape[0] if shared is not None else 0,
        "dense_ffn": dense.shape[0] if dense is not None else 0,
        "checkpointing": CHECKPOINTING.get(type(config.activation_checkpoint).__qualname__.split(".")[0], "other"),
        "seq_len": config.training.seq_len,
    }


if __name__ == "__main__":
    for pair in sys.argv[1:]:
        module, config_name = pair.split("/")
        print(json.dumps({"preset": pair, **facts(module, config_name)}), flush=True)
