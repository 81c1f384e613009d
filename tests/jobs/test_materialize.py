"""A model built on the meta device and made real (jobs/training/materialize.py) starts from the weights the
same model built whole does, parameter by parameter, whatever order or block asks; the layouts under torchrun
(tests/jobs/parallel_layouts.py) check it shard by shard."""

from __future__ import annotations

import pytest

from tests.conftest import require_module

require_module("torch", "pip install -e '.[jobs]'")

import torch  # noqa: E402

from jobs.training import model as model_module  # noqa: E402
from jobs.training.config import ModelConfig  # noqa: E402
from jobs.training.materialize import is_meta, materialize  # noqa: E402
from jobs.training.model import Transformer, parameter_seed  # noqa: E402
from jobs.training.presets import PRESETS, ModelShape  # noqa: E402

pytestmark = pytest.mark.torch

SHAPE = ModelShape(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=160, vocab_size=512)
TIED = ModelShape(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=160, vocab_size=512, tie_embeddings=True)


def deferred(shape: ModelShape, seed: int) -> Transformer:
    with torch.device("meta"):
        model = Transformer(ModelConfig(shape, 16, 0.0), seed=seed)
    assert is_meta(model)
    materialize(model, torch.device("cpu"), seed)
    assert not is_meta(model)
    return model


@pytest.mark.parametrize("shape", [SHAPE, TIED], ids=["untied", "tied"])
def test_built_on_meta_and_made_real_equals_built_whole(shape: ModelShape) -> None:
    whole = Transformer(ModelConfig(shape, 16, 0.0), seed=5)
    made = deferred(shape, 5)
    for (name, a), (_, b) in zip(whole.state_dict().items(), made.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert torch.equal(whole.rope_cos, made.rope_cos) and torch.equal(whole.rope_sin, made.rope_sin)
    if shape.tie_embeddings:
        assert made.tok_embeddings.weight is made.output.weight


def test_each_parameter_depends_on_the_seed_and_its_name_only() -> None:
    model = Transformer(ModelConfig(SHAPE, 16, 0.0), seed=1)
    name, size = "layers.1.feed_forward.w2.weight", (64, 160)
    first = model.initial_value(name, size, torch.device("cpu"), seed=1)
    for other in reversed(list(dict(model.named_parameters()))):  # drawing others in any order changes nothing
        model.initial_value(other, tuple(dict(model.named_parameters())[other].shape), torch.device("cpu"), 1)
    assert torch.equal(model.initial_value(name, size, torch.device("cpu"), seed=1), first)
    assert torch.equal(dict(model.named_parameters())[name].detach(), first)
    assert not torch.equal(model.initial_value(name, size, torch.device("cpu"), seed=2), first)
    assert parameter_seed(1, name) != parameter_seed(1, "layers.0.feed_forward.w2.weight")


def test_a_large_parameter_is_drawn_in_blocks_each_from_its_own_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows in blocks of INIT_BLOCK_ELEMENTS, so trunc_normal_'s temporaries stay a block's, not the matrix's."""
    monkeypatch.setattr(model_module, "INIT_BLOCK_ELEMENTS", 64 * 100)  # 100 rows of the 512 x 64 output
    model = Transformer(ModelConfig(SHAPE, 16, 0.0), seed=0)
    value = model.initial_value("output.weight", (512, 64), torch.device("cpu"), seed=3)
    std = 64**-0.5
    for block, start in enumerate(range(0, 512, 100)):
        rows = torch.empty(min(100, 512 - start), 64)
        generator = torch.Generator().manual_seed(parameter_seed(3, f"output.weight#{block}"))
        torch.nn.init.trunc_normal_(rows, std=std, a=-3 * std, b=3 * std, generator=generator)
        assert torch.equal(value[start : start + 100], rows), block


def test_the_distributions_are_torchtitans() -> None:
    shape = PRESETS["debug"]
    model = Transformer(ModelConfig(shape, 16, 0.0), seed=0)
    std = shape.dim**-0.5
    out = model.output.weight
    assert out.abs().max() <= 3 * std and abs(out.std().item() - std) < 0.2 * std
    assert abs(model.layers["0"].attention.wq.weight.std().item() - 0.02) < 0.002
    deep = model.layers[str(shape.n_layers - 1)].feed_forward.w2.weight
    assert abs(deep.std().item() - 0.02 / (2 * shape.n_layers) ** 0.5) < 0.2 * 0.02 / (2 * shape.n_layers) ** 0.5
    assert torch.equal(model.norm.weight, torch.ones(shape.dim))
    with pytest.raises(KeyError, match=r"no initial value for parameter 'layers\.0\.attention\.bias'"):
        model.initial_value("layers.0.attention.bias", (4,), torch.device("cpu"), 0)
