"""Released weights in (jobs/training/released.py): a tiny Llama 3.1 written by Hugging Face's own
`save_pretrained`, and the same weights in Meta's layout, each loaded into our model built on the meta device,
give the logits of transformers' LlamaForCausalLM; with RoPE scaling, past the original context."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import require_module

require_module("torch", "pip install -e '.[jobs]'")
require_module("transformers", "pip install -e '.[recipes]'")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from jobs.training.config import ModelConfig  # noqa: E402
from jobs.training.materialize import materialize  # noqa: E402
from jobs.training.model import Transformer  # noqa: E402
from jobs.training.presets import RopeScaling  # noqa: E402
from jobs.training.released import ReleasedWeights, ReleaseError, read_release  # noqa: E402
from tests.jobs import runs  # noqa: E402

pytestmark = pytest.mark.torch

SEQ = 48  # past the original context of 16 below, where Llama 3.1's scaling changes the frequencies
HF_CONFIG = dict(
    vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=False,
    rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
)  # fmt: skip


@pytest.fixture(scope="module")
def hf_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[LlamaForCausalLM, Path]:
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**HF_CONFIG)).eval()
    with torch.no_grad():  # norms away from 1, so a norm read into the wrong place shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    directory = tmp_path_factory.mktemp("hf")
    model.save_pretrained(directory)  # safetensors, config.json: what the Hub's Llama repositories hold
    return model, directory


def meta_layout(hf: LlamaForCausalLM, directory: Path) -> Path:
    """The same weights under Meta's names, q and k rows back in adjacent pairs: Meta row 2i of a head is
    Hugging Face's row i, row 2i + 1 its row head_dim / 2 + i."""
    state, heads, kv_heads = hf.state_dict(), HF_CONFIG["num_attention_heads"], HF_CONFIG["num_key_value_heads"]
    head_dim = HF_CONFIG["hidden_size"] // heads

    def unpermute(w: torch.Tensor, n: int) -> torch.Tensor:
        order = [h * head_dim + (i // 2 if i % 2 == 0 else head_dim // 2 + i // 2)
                 for h in range(n) for i in range(head_dim)]  # fmt: skip
        return w[order].contiguous()

    out = {"tok_embeddings.weight": state["model.embed_tokens.weight"], "norm.weight": state["model.norm.weight"],
           "output.weight": state["lm_head.weight"]}  # fmt: skip
    for i in range(HF_CONFIG["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out |= {
            f"layers.{i}.attention.wq.weight": unpermute(state[p + "self_attn.q_proj.weight"], heads),
            f"layers.{i}.attention.wk.weight": unpermute(state[p + "self_attn.k_proj.weight"], kv_heads),
            f"layers.{i}.attention.wv.weight": state[p + "self_attn.v_proj.weight"],
            f"layers.{i}.attention.wo.weight": state[p + "self_attn.o_proj.weight"],
            f"layers.{i}.feed_forward.w1.weight": state[p + "mlp.gate_proj.weight"],
            f"layers.{i}.feed_forward.w2.weight": state[p + "mlp.down_proj.weight"],
            f"layers.{i}.feed_forward.w3.weight": state[p + "mlp.up_proj.weight"],
            f"layers.{i}.attention_norm.weight": state[p + "input_layernorm.weight"],
            f"layers.{i}.ffn_norm.weight": state[p + "post_attention_layernorm.weight"],
        }
    directory.mkdir()
    save_file({k: v.contiguous() for k, v in out.items()}, str(directory / "consolidated.00.safetensors"))
    # params.json as Meta writes it: SwiGLU width int(2/3 x 4 x 64) = 170, x 0.94 = 159, up to a multiple of 32: 160.
    params = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 256, "multiple_of": 32,
              "ffn_dim_multiplier": 0.94, "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": True}
    (directory / "params.json").write_text(json.dumps(params))
    return directory


def ours(directory: Path, **change: object) -> Transformer:
    release = read_release(directory)
    shape = release.shape if not change else type(release.shape)(**{**release.shape.__dict__, **change})
    with torch.device("meta"):
        model = Transformer(ModelConfig(shape, SEQ, 0.0))
    weights = ReleasedWeights(release)
    try:
        materialize(model, torch.device("cpu"), 0, weights)
    finally:
        weights.close()
    return model.eval()


def test_hugging_face_layout_gives_hugging_face_logits(hf_model: tuple[LlamaForCausalLM, Path]) -> None:
    hf, directory = hf_model
    release = read_release(directory)
    assert release.layout == "huggingface"
    assert release.shape.rope_scaling == RopeScaling(8.0, 1.0, 4.0, 16) and release.shape.n_kv_heads == 2
    idx = torch.randint(0, 256, (2, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(idx).logits
        got = ours(directory)(idx)
        unscaled = ours(directory, rope_scaling=None)(idx)
    assert torch.allclose(got, expected, atol=2e-5, rtol=0), (got - expected).abs().max()
    # The scaling matters past the original context: without it the logits there differ.
    assert (unscaled[:, 16:] - expected[:, 16:]).abs().max() > 1e-3


def test_meta_layout_gives_the_same_logits(hf_model: tuple[LlamaForCausalLM, Path], tmp_path: Path) -> None:
    hf, _ = hf_model
    directory = meta_layout(hf, tmp_path / "meta")
    release = read_release(directory)
    assert release.layout == "meta" and release.shape.ffn_dim == 160
    idx = torch.randint(0, 256, (2, SEQ), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = hf(idx).logits
    # Meta's 3.1 scaling is factor 8 over an original context of 8192: here the test's 16, to reach it at SEQ.
    model = ours(directory, rope_scaling=RopeScaling(8.0, 1.0, 4.0, 16))
    with torch.no_grad():
        assert torch.allclose(model(idx), expected, atol=2e-5, rtol=0)


def test_read_into_sharded_layouts_under_torchrun(hf_model: tuple[LlamaForCausalLM, Path]) -> None:
    """TP 2 x FSDP 2 and FSDP 4 over 4 ranks, each reading the release a tensor at a time and keeping its slice:
    the loss of a batch is transformers' on the same weights."""
    hf, directory = hf_model
    batch = torch.randint(0, 256, (2, SEQ + 1), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits = hf(batch[:, :-1]).logits
        expected = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1)).item()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4",
           str(Path(__file__).with_name("released_layouts.py")), str(directory), str(SEQ)]  # fmt: skip
    run = runs.launch(cmd, timeout=600)
    assert run.rc == 0, run.stderr[-3000:]
    assert [e["layout"] for e in run.events] == ["fsdp2 dp_shard=2 tp=2", "fsdp2 dp_shard=4"]
    for event in run.events:
        assert abs(float(event["loss"]) - expected) < 2e-5, (event, expected)


def test_a_release_that_is_not_llama_or_lacks_a_tensor_is_refused(hf_model: tuple[LlamaForCausalLM, Path],
                                                                   tmp_path: Path) -> None:  # fmt: skip
    _, directory = hf_model
    config = json.loads((directory / "config.json").read_text())
    other = tmp_path / "mistral"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({**config, "model_type": "mistral"}))
    with pytest.raises(ReleaseError, match=r"config.json: model_type is 'mistral'"):
        read_release(other)
    with pytest.raises(ReleaseError, match=r"neither config\.json"):
        read_release(tmp_path)
    (other / "config.json").write_text(json.dumps(config))
    with pytest.raises(ReleaseError, match=r"no \*\.safetensors files"):
        ReleasedWeights(read_release(other))
    wrong = tmp_path / "wide"
    wrong.mkdir()
    (wrong / "config.json").write_text(json.dumps({**config, "intermediate_size": 192}))
    (wrong / "model.safetensors").symlink_to(directory / "model.safetensors")
    with pytest.raises(ReleaseError, match=r"'model.layers.0.mlp.gate_proj.weight' is \(160, 64\), the model's"):
        ours(wrong)


def test_the_entry_point_takes_the_shape_from_the_release(hf_model: tuple[LlamaForCausalLM, Path],
                                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from jobs.training.config import parse_args

    _, directory = hf_model
    cfg = parse_args(["--init-from", str(directory), "--seq-len", str(SEQ)])
    assert cfg.init_from == directory and cfg.model.shape == read_release(directory).shape
    with pytest.raises(SystemExit):
        parse_args(["--init-from", str(directory), "--model", "debug"])
    assert "--model conflicts with --init-from" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--init-from", str(directory.parent)])
    assert "neither config.json (Hugging Face) nor params.json (Meta)" in capsys.readouterr().err
