"""In-process unit tests of the training modules: schedule, token data, model, checkpoint dirs, flags."""

from __future__ import annotations

import array
import itertools
import json
import math
import re
from pathlib import Path

import pytest

from tests.conftest import require_module

torch = require_module("torch", "pip install -e '.[jobs]': jobs/training needs it")

from jobs.training.checkpoint import checkpoints, latest_complete, prune  # noqa: E402
from jobs.training.config import ModelConfig, parse_args  # noqa: E402
from jobs.training.data import BatchLoader, SyntheticTokens, TokenFile  # noqa: E402
from jobs.training.model import GPT, count_params, flops_per_token  # noqa: E402
from jobs.training.optim import build_scheduler, lr_multiplier  # noqa: E402

pytestmark = pytest.mark.torch

SMALL = ModelConfig(vocab_size=50, seq_len=12, d_model=16, n_layers=2, n_heads=4, dropout=0.0)


# --- schedule ---------------------------------------------------------------------------------------------


def test_warmup_is_linear_up_to_the_peak() -> None:
    assert [lr_multiplier(s, 4, 20, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]


def test_cosine_decays_monotonically_to_the_floor() -> None:
    values = [lr_multiplier(s, 4, 20, 0.1) for s in range(4, 25)]
    assert values[0] == 1.0
    assert all(a > b for a, b in itertools.pairwise(values[:17]))
    assert lr_multiplier(12, 4, 20, 0.1) == pytest.approx(0.55)  # halfway through the cosine
    assert values[16:] == [pytest.approx(0.1)] * 5  # stays at the floor past the end


def test_no_warmup_starts_at_the_peak() -> None:
    assert lr_multiplier(0, 0, 10, 0.0) == 1.0
    assert lr_multiplier(10, 0, 10, 0.0) == pytest.approx(0.0)


def test_scheduler_applies_the_multiplier_to_the_optimizer() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=2.0)
    sched = build_scheduler(opt, warmup_steps=3, total_steps=10, min_ratio=0.2)
    seen = []
    for _ in range(10):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([2.0 * lr_multiplier(s, 3, 10, 0.2) for s in range(10)])
    assert "lr_lambdas" in sched.state_dict() and sched.state_dict()["lr_lambdas"] == [None]


# --- data -------------------------------------------------------------------------------------------------


def write_tokens(path: Path, tokens: list[int], typecode: str = "H") -> Path:
    path.write_bytes(array.array(typecode, tokens).tobytes())
    return path


def test_token_file_windows_are_consecutive_and_split_across_ranks(tmp_path: Path) -> None:
    source = TokenFile(write_tokens(tmp_path / "t.bin", list(range(41))), "uint16", vocab_size=100, window=4)
    assert source.windows == 10
    rank0 = BatchLoader(source, batch_size=2, seq_len=4, rank=0, world_size=2)
    rank1 = BatchLoader(source, batch_size=2, seq_len=4, rank=1, world_size=2)
    x0, y0 = rank0.next()
    x1, _ = rank1.next()
    assert x0.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert y0.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]  # targets are the inputs shifted by one
    assert x1.tolist() == [[8, 9, 10, 11], [12, 13, 14, 15]]
    assert x0.dtype == torch.int64
    rank0.next()
    x0, _ = rank0.next()  # micro-batch 2 of rank 0: windows 8 and 9
    assert x0.tolist() == [[32, 33, 34, 35], [36, 37, 38, 39]]
    assert rank0.next()[0].tolist()[0] == [8, 9, 10, 11]  # window 12 wraps to window 2
    assert rank0.position == 4


def test_token_file_uint32_and_errors(tmp_path: Path) -> None:
    big = TokenFile(write_tokens(tmp_path / "u32.bin", [70_000] * 9, "I"), "uint32", vocab_size=70_001, window=4)
    assert big.sample(0, 5).tolist() == [70_000] * 5
    with pytest.raises(ValueError, match="not a whole number"):
        TokenFile(write_tokens(tmp_path / "odd.bin", [1] * 9, "B"), "uint16", vocab_size=10, window=4)
    with pytest.raises(ValueError, match="fewer than one sequence"):
        TokenFile(write_tokens(tmp_path / "short.bin", [1] * 4), "uint16", vocab_size=10, window=4)
    oob = TokenFile(write_tokens(tmp_path / "oob.bin", [1, 2, 99, 3, 4]), "uint16", vocab_size=10, window=4)
    with pytest.raises(ValueError, match=r"token 99 .* >= --vocab-size 10"):
        oob.sample(0, 5)


def test_synthetic_batches_depend_only_on_seed_position_and_rank() -> None:
    def batch(seed: int, rank: int, position: int) -> list[list[int]]:
        loader = BatchLoader(SyntheticTokens(64, seed), batch_size=3, seq_len=8, rank=rank, world_size=2)
        loader.position = position
        return loader.next()[0].tolist()

    fresh = BatchLoader(SyntheticTokens(64, 7), batch_size=3, seq_len=8, rank=1, world_size=2)
    drawn = [fresh.next()[0].tolist() for _ in range(3)]
    assert drawn[2] == batch(7, 1, 2)  # resuming at a position replays exactly what was drawn there
    assert batch(7, 0, 2) != batch(7, 1, 2) and batch(8, 1, 2) != batch(7, 1, 2)
    row = torch.tensor(drawn[0][0])
    assert (row.diff() % 64 == row.diff()[0] % 64).all()  # a learnable arithmetic progression


# --- model ------------------------------------------------------------------------------------------------


def test_model_shapes_and_loss() -> None:
    torch.manual_seed(0)
    model = GPT(SMALL)
    idx = torch.randint(0, SMALL.vocab_size, (3, SMALL.seq_len))
    assert model(idx).shape == (3, SMALL.seq_len, SMALL.vocab_size)
    assert model(idx[:, :5]).shape == (3, 5, SMALL.vocab_size)
    loss = model(idx, idx)
    assert loss.shape == () and loss.item() == pytest.approx(math.log(SMALL.vocab_size), rel=0.1)
    with pytest.raises(ValueError, match="exceeds seq_len"):
        model(torch.zeros(1, SMALL.seq_len + 1, dtype=torch.long))


def test_attention_is_causal() -> None:
    torch.manual_seed(0)
    model = GPT(SMALL).eval()
    idx = torch.randint(0, SMALL.vocab_size, (1, SMALL.seq_len))
    changed = idx.clone()
    changed[0, -1] = (changed[0, -1] + 1) % SMALL.vocab_size
    torch.testing.assert_close(model(idx)[:, :-1], model(changed)[:, :-1])


def test_activation_checkpointing_gives_the_same_gradients() -> None:
    cfg = ModelConfig(**{**SMALL.__dict__, "dropout": 0.2})
    grads = []
    for ac in (False, True):
        torch.manual_seed(0)
        model = GPT(cfg)
        model.activation_checkpointing = ac
        idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
        model(idx, idx).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.equal(grads[0], grads[1])  # dropout masks replayed from the saved RNG state


def test_param_count_and_flops() -> None:
    model = GPT(SMALL)
    d, v, t, n_layers = SMALL.d_model, SMALL.vocab_size, SMALL.seq_len, SMALL.n_layers
    per_block = 12 * d * d + 13 * d  # qkv + proj + fc + proj weights and biases, two layer norms
    assert count_params(model) == v * d + t * d + n_layers * per_block + 2 * d + d * v
    assert flops_per_token(model) == 6 * (n_layers * per_block + 2 * d + d * v) + 12 * n_layers * d * t


# --- checkpoint directories -------------------------------------------------------------------------------


def make_step(root: Path, step: int, complete: bool) -> Path:
    path = root / f"step-{step}"
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"x")
    if complete:
        (path / ".metadata").write_bytes(b"m")
    return path


def test_latest_complete_skips_torn_and_foreign_dirs(tmp_path: Path) -> None:
    assert latest_complete(tmp_path / "missing") is None
    for step, complete in [(5, True), (10, True), (15, False)]:
        make_step(tmp_path, step, complete)
    (tmp_path / "step-99.old").mkdir()
    (tmp_path / "step-100").write_text("a file, not a checkpoint")
    assert [s for s, _ in checkpoints(tmp_path)] == [5, 10, 15]
    assert latest_complete(tmp_path) == (10, tmp_path / "step-10")


def test_prune_keeps_the_latest_k_complete_and_drops_torn(tmp_path: Path) -> None:
    for step, complete in [(2, True), (4, False), (6, True), (8, True), (10, False)]:
        make_step(tmp_path, step, complete)
    removed = prune(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["step-10", "step-2", "step-4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-6", "step-8"]


# --- flags ------------------------------------------------------------------------------------------------


def test_json_config_sets_defaults_that_flags_override(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"d_model": 64, "n_heads": 8, "steps": 30, "fsdp": True}))
    cfg = parse_args(["--config", str(config), "--steps", "40"])
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.steps, cfg.fsdp) == (64, 8, 40, True)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--d-model", "30", "--n-heads", "4"], "divisible by --n-heads"),
        (["--steps", "0"], "must be >= 1"),
        (["--dropout", "1.5"], r"must be in \[0, 1\)"),
        (["--warmup-steps", "100", "--steps", "50"], "must be < --steps"),
        (["--data", "/nonexistent/tokens.bin"], "no such file"),
        (["--data-dtype", "int8"], "invalid choice"),
    ],
)
def test_bad_flags_exit_with_a_clear_message(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_json_config_rejects_unknown_keys(tmp_path: Path, capsys) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"d_modle": 64}))
    with pytest.raises(SystemExit):
        parse_args(["--config", str(config)])
    assert "unknown keys ['d_modle']" in capsys.readouterr().err
