"""The Llama-style decoder (jobs/training/model.py), its presets' parameter and FLOP counts against the built
modules and against hand counts, and the model flags."""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import require_module

torch = require_module("torch", "pip install -e '.[jobs]': jobs/training needs it")

from torch import nn  # noqa: E402

from jobs.training.config import ModelConfig, parse_args  # noqa: E402
from jobs.training.model import Transformer, apply_rope, count_params, rope_tables  # noqa: E402
from jobs.training.presets import PRESETS, ModelShape, ffn_hidden_dim  # noqa: E402

pytestmark = pytest.mark.torch

# Grouped-query (2 query heads per kv head), head dim 4.
SMALL = ModelConfig(ModelShape(dim=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=48, vocab_size=50), 12, 0.0)
TIED = ModelShape(dim=24, n_layers=3, n_heads=4, n_kv_heads=1, ffn_dim=64, vocab_size=40, tie_embeddings=True)


def build(shape: ModelShape, seq_len: int = 12, dropout: float = 0.0, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(ModelConfig(shape, seq_len, dropout))


# --- parameter and FLOP counts -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [PRESETS["debug"], TIED, SMALL.shape], ids=["debug", "tied", "small"])
def test_analytic_params_equal_the_modules(shape: ModelShape) -> None:
    assert count_params(build(shape)) == shape.params()


def test_llama3_8b_on_the_meta_device_has_the_analytic_count() -> None:
    with torch.device("meta"):
        model = Transformer(ModelConfig(PRESETS["llama3-8b"], 8192, 0.0, "llama3-8b"))
    assert count_params(model) == PRESETS["llama3-8b"].params() == 8_030_261_248
    assert model.rope_cos.is_meta and model.rope_cos.shape == (8192, 64)


def test_preset_params_are_the_published_counts() -> None:
    """Each preset counted by hand: layers x (wq + wo, wk + wv, w1 + w2 + w3, two norms) + embeddings
    (twice unless tied) + the final norm; 128256 is the Llama 3 vocabulary."""
    v = 128_256
    # 1B: dim 2048, 16 layers, kv width 8 x 64 = 512, SwiGLU 8192, tied.
    assert PRESETS["llama3-1b"].params() == (
        16 * (2 * 2048**2 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048) + v * 2048 + 2048
    ) == 1_235_814_400  # fmt: skip
    # 8B: dim 4096, 32 layers, kv width 8 x 128 = 1024, SwiGLU 14336.
    assert PRESETS["llama3-8b"].params() == (
        32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 2 * v * 4096 + 4096
    ) == 8_030_261_248  # fmt: skip
    # 70B: dim 8192, 80 layers, kv width 8 x 128 = 1024, SwiGLU 28672.
    assert PRESETS["llama3-70b"].params() == (
        80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 2 * v * 8192 + 8192
    ) == 70_553_706_496  # fmt: skip
    # 405B: dim 16384, 126 layers, kv width 8 x 128 = 1024, SwiGLU 53248.
    assert PRESETS["llama3-405b"].params() == (
        126 * (2 * 16384**2 + 2 * 16384 * 1024 + 3 * 16384 * 53248 + 2 * 16384) + 2 * v * 16384 + 16384
    ) == 405_853_388_800  # fmt: skip


def test_flops_per_token_by_hand() -> None:
    """8B at 8192 tokens: 6 x (params - the input embedding, a lookup) + 6 x layers x heads x (q/k + v head
    dims, 2 x 128) x seq_len (torchtitan's get_dense_model_nparams_and_flops)."""
    matmul = 8_030_261_248 - 128_256 * 4096
    assert matmul == 7_504_924_672
    attention = 6 * 32 * 32 * (2 * 128) * 8192
    assert PRESETS["llama3-8b"].flops_per_token(8192) == 6 * matmul + attention == 57_914_449_920
    # Tied (1B): the shared weight is the output projection's matmul, so it stays in.
    assert PRESETS["llama3-1b"].flops_per_token(2048) == 6 * 1_235_814_400 + 6 * 16 * 32 * 128 * 2048


# --- structure -------------------------------------------------------------------------------------------


def test_names_are_torchtitans_and_there_are_no_biases() -> None:
    model = build(SMALL.shape)
    per_layer = ["attention_norm", "attention.wq", "attention.wk", "attention.wv", "attention.wo", "ffn_norm",
                 "feed_forward.w1", "feed_forward.w2", "feed_forward.w3"]  # fmt: skip
    layers = [f"layers.{i}.{name}.weight" for i in range(2) for name in per_layer]
    assert [n for n, _ in model.named_parameters()] == ["tok_embeddings.weight", *layers, "norm.weight",
                                                         "output.weight"]  # fmt: skip
    assert isinstance(model.layers, nn.ModuleDict) and list(model.layers) == ["0", "1"]
    assert list(model.state_dict()) == [n for n, _ in model.named_parameters()]  # rope tables not saved
    assert model.layers["0"].attention.wk.weight.shape == (2 * 4, 16)  # n_kv_heads x head_dim


def test_tied_embeddings_share_one_weight_across_moves() -> None:
    model = build(TIED)
    assert model.output.weight is model.tok_embeddings.weight
    model.to("meta")  # a parameter of another tensor type: nn.Module replaces it, untying
    assert model.output.weight is model.tok_embeddings.weight
    model.to_empty(device="cpu")
    model.init_weights()
    assert model.output.weight is model.tok_embeddings.weight and count_params(model) == TIED.params()
    fresh_cos, fresh_sin = rope_tables(TIED.head_dim, 12)
    assert torch.equal(model.rope_cos, fresh_cos) and torch.equal(model.rope_sin, fresh_sin)


# --- init ------------------------------------------------------------------------------------------------


def test_init_follows_torchtitan_llama3(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which initialiser, with which std and cut, each parameter gets (torchtitan/models/llama3/__init__.py)."""
    calls: list[tuple[str, float, float, float]] = []

    def record(kind: str) -> Callable[..., torch.Tensor]:
        def init(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
            calls.append((kind, std, a, b))
            return tensor

        return init

    model = build(SMALL.shape)
    monkeypatch.setattr(nn.init, "trunc_normal_", record("trunc_normal"))
    monkeypatch.setattr(nn.init, "normal_", record("normal"))
    seen = {}
    for name, p in model.named_parameters():  # what each parameter's initial value is drawn with (every block)
        calls.clear()
        model.initial_value(name, tuple(p.shape), p.device, seed=0)
        seen[name] = calls[0] if calls and all(c == calls[0] for c in calls) else None
    assert seen["tok_embeddings.weight"] == ("normal", 1.0, -2.0, 2.0)
    out_std = 16**-0.5
    assert seen["output.weight"] == ("trunc_normal", out_std, -3 * out_std, 3 * out_std)
    for i in range(2):
        depth = 0.02 / (2 * (i + 1)) ** 0.5  # depth_scaled_std(0.02, layer_id)
        for name in ("attention.wq", "attention.wk", "attention.wv", "feed_forward.w1"):
            assert seen[f"layers.{i}.{name}.weight"] == ("trunc_normal", 0.02, -2.0, 2.0)
        for name in ("attention.wo", "feed_forward.w2", "feed_forward.w3"):
            assert seen[f"layers.{i}.{name}.weight"] == ("trunc_normal", depth, -2.0, 2.0)
    norms = [p for n, p in model.named_parameters() if n.endswith("norm.weight")]
    assert len(norms) == 5 and all(torch.equal(p, torch.ones_like(p)) for p in norms)


def test_init_statistics_and_the_tied_weight_takes_the_output_init() -> None:
    model = build(PRESETS["debug"])
    assert model.tok_embeddings.weight.std().item() == pytest.approx(1.0, rel=0.02)
    assert model.output.weight.std().item() == pytest.approx(256**-0.5 * 0.986, rel=0.02)  # cut at 3 std
    assert model.layers["5"].attention.wo.weight.std().item() == pytest.approx(0.02 / math.sqrt(12), rel=0.03)
    tied = build(TIED)
    assert tied.tok_embeddings.weight.abs().max().item() <= 3 * 24**-0.5


def test_a_pipeline_stage_inits_its_layers_by_their_keys() -> None:
    whole = build(SMALL.shape)
    stage = build(SMALL.shape)
    del stage.layers["0"]
    with torch.no_grad():
        for p in stage.parameters():
            p.zero_()
    stage.init_weights()
    # Layer "1" of the stage is layer 1 of the whole model: its depth-scaled std (0.02 / sqrt(4)) and its numbers.
    for name, p in stage.layers["1"].named_parameters():
        assert torch.equal(p, dict(whole.layers["1"].named_parameters())[name]), name
    assert stage.layers["1"].feed_forward.w2.weight.std().item() == pytest.approx(0.02 / math.sqrt(4), rel=0.1)


# --- forward ---------------------------------------------------------------------------------------------


def test_shapes_and_loss() -> None:
    model = build(SMALL.shape)
    v, t = SMALL.shape.vocab_size, SMALL.seq_len
    idx = torch.randint(0, v, (3, t))
    assert model(idx).shape == (3, t, v)
    assert model(idx[:, :5]).shape == (3, 5, v)
    loss = model(idx, idx)
    # Unit-RMS hidden states through an output of std dim^-0.5: logits of std ~1, so log V + ~1/2.
    assert loss.shape == () and math.log(v) < loss.item() < math.log(v) + 1
    with pytest.raises(ValueError, match="exceeds seq_len"):
        model(torch.zeros(1, t + 1, dtype=torch.long))


def test_attention_is_causal() -> None:
    model = build(SMALL.shape).eval()
    idx = torch.randint(0, SMALL.shape.vocab_size, (1, SMALL.seq_len))
    changed = idx.clone()
    changed[0, -1] = (changed[0, -1] + 1) % SMALL.shape.vocab_size
    torch.testing.assert_close(model(idx)[:, :-1], model(changed)[:, :-1])


def test_rope_is_the_complex_rotation_of_adjacent_pairs() -> None:
    """Against torchtitan's ComplexRoPE formula (torch.polar, view_as_complex on pairs), and the point of it:
    q.k after rotation depends on the positions' difference only."""
    head_dim, t = 8, 6
    x = torch.randn(2, t, 3, head_dim)
    freqs = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    cis = torch.polar(torch.ones(t, head_dim // 2), torch.outer(torch.arange(t), freqs).float())
    expected = torch.view_as_real(torch.view_as_complex(x.reshape(2, t, 3, -1, 2)) * cis[:, None, :]).flatten(-2)
    cos, sin = rope_tables(head_dim, t)
    torch.testing.assert_close(apply_rope(x, cos, sin), expected)
    q, k = torch.randn(head_dim), torch.randn(head_dim)

    def dot(m: int, n: int) -> float:
        rq = apply_rope(q.expand(1, t, 1, head_dim), cos, sin)[0, m, 0]
        rk = apply_rope(k.expand(1, t, 1, head_dim), cos, sin)[0, n, 0]
        return (rq @ rk).item()

    assert dot(3, 1) == pytest.approx(dot(5, 3), rel=1e-5)
    assert apply_rope(x.bfloat16(), cos, sin).dtype == torch.bfloat16


def test_grouped_query_attention_equals_heads_with_copied_kv_weights() -> None:
    """n_kv_heads=2 for 4 query heads is the 4-head model whose key/value heads 0,1 and 2,3 are copies."""
    grouped = build(SMALL.shape).eval()
    full = Transformer(ModelConfig(ModelShape(**{**SMALL.shape.__dict__, "n_kv_heads": 4}), 12, 0.0)).eval()
    state = grouped.state_dict()
    for name, tensor in state.items():
        if name.endswith(("wk.weight", "wv.weight")):  # [kv heads x head_dim, dim] -> each head twice
            state[name] = tensor.view(2, 4, 16).repeat_interleave(2, dim=0).reshape(16, 16)
    full.load_state_dict(state)
    idx = torch.randint(0, 50, (2, 12))
    torch.testing.assert_close(full(idx), grouped(idx))


def test_pipeline_stages_chain_to_the_whole_model() -> None:
    model = build(SMALL.shape).eval()
    first, last = copy.deepcopy(model), copy.deepcopy(model)
    del first.layers["1"]
    first.norm, first.output = None, None
    del last.layers["0"]
    last.tok_embeddings = None
    idx = torch.randint(0, 50, (2, 12))
    hidden = first(idx)
    assert hidden.shape == (2, 12, 16)
    torch.testing.assert_close(last(hidden), model(idx))
    assert list(last.state_dict())[:2] == ["layers.1.attention_norm.weight", "layers.1.attention.wq.weight"]


def test_dropout_acts_in_training_only() -> None:
    model = build(SMALL.shape, dropout=0.5)
    idx = torch.randint(0, 50, (2, 12))
    assert not torch.equal(model(idx), model(idx))
    model.eval()
    assert torch.equal(model(idx), model(idx))


def test_activation_checkpointing_gives_the_same_gradients() -> None:
    grads = []
    for ac, every in ((False, 1), (True, 1), (True, 2)):  # none, every layer, every second layer
        torch.manual_seed(3)
        model = build(SMALL.shape, dropout=0.2)
        model.activation_checkpointing, model.ac_every = ac, every
        idx = torch.randint(0, 50, (2, 12))
        model(idx, idx).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.equal(grads[0], grads[1]) and torch.equal(grads[0], grads[2])  # dropout masks replayed


# --- flags -----------------------------------------------------------------------------------------------


def test_a_preset_by_name() -> None:
    cfg = parse_args(["--model", "llama3-8b", "--seq-len", "4096"])
    assert cfg.model == ModelConfig(PRESETS["llama3-8b"], 4096, 0.0, "llama3-8b")


def test_a_custom_shape_and_its_defaults() -> None:
    cfg = parse_args(["--d-model", "96", "--n-heads", "6"])
    assert cfg.model.name == "custom"
    assert cfg.model.shape == ModelShape(dim=96, n_layers=2, n_heads=6, n_kv_heads=6, ffn_dim=ffn_hidden_dim(96, 256),
                                         vocab_size=512)  # fmt: skip
    assert cfg.model.shape.ffn_dim == 256
    flags = ["--n-kv-heads", "2", "--ffn-dim", "100", "--tie-embeddings", "--n-layers", "3", "--vocab-size", "70"]
    shape = parse_args(flags).model.shape
    assert (shape.n_kv_heads, shape.ffn_dim, shape.tie_embeddings, shape.n_layers, shape.vocab_size) == (
        2, 100, True, 3, 70)  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--model", "llama3-8b", "--d-model", "64"],
            "--d-model conflicts with --model llama3-8b: a preset fixes the shape",
        ),
        (["--tie-embeddings", "--model", "debug"], "--tie-embeddings conflicts with --model debug"),
        (["--model", "llama3-9b"], "invalid choice: 'llama3-9b'"),
        (["--n-heads", "4", "--n-kv-heads", "3"], "n_heads 4 is not divisible by n_kv_heads 3"),
        (["--d-model", "12", "--n-heads", "4"], "head dim 3 is odd"),
        (["--ac-every", "2"], "--ac-every 2 chooses which layers --activation-checkpointing recomputes"),
    ],
)
def test_bad_model_flags(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_preset_in_the_json_config_conflicts_with_a_shape_flag(tmp_path: Path, capsys) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"model": "debug", "steps": 30}))
    assert parse_args(["--config", str(config)]).model.shape == PRESETS["debug"]
    with pytest.raises(SystemExit):
        parse_args(["--config", str(config), "--n-heads", "8"])
    assert re.search("--n-heads conflicts with --model debug", capsys.readouterr().err)
