"""jobs/training/data.py: token files sampled in a seeded order that visits every window once per epoch,
batches addressed by a global sample count (a resume on another world size neither replays nor skips),
and the `slurm-eks data prepare` sidecar checked against the flags."""

from __future__ import annotations

import array
import json
import re
from pathlib import Path

import pytest

from tests.conftest import require_module

torch = require_module("torch", "pip install -e '.[jobs]': jobs/training needs it")

from jobs.training.data import BatchLoader, SyntheticTokens, TokenFile, window_order  # noqa: E402

pytestmark = pytest.mark.torch


def write_tokens(path: Path, tokens: list[int], typecode: str = "H") -> Path:
    path.write_bytes(array.array(typecode, tokens).tobytes())
    return path


class Recorder:
    """A token source whose sample i is i repeated, noting every index drawn."""

    vocab_size = 1 << 20

    def __init__(self, seen: list[int]) -> None:
        self.seen = seen

    def sample(self, index: int, length: int) -> torch.Tensor:
        self.seen.append(index)
        return torch.full((length,), index)


# --- the window order -------------------------------------------------------------------------------------


@pytest.mark.parametrize("windows", [1, 2, 7, 12, 97, 360, 1024])
def test_each_epochs_order_is_a_bijection_of_the_windows(windows: int) -> None:
    for seed in (0, 1, 12345):
        for epoch in range(4):
            a, b = window_order(seed, epoch, windows)
            assert sorted((a * i + b) % windows for i in range(windows)) == list(range(windows))


def test_the_order_is_drawn_again_per_epoch_and_per_seed() -> None:
    orders = {window_order(seed, epoch, 360) for seed in (0, 1) for epoch in (0, 1, 2)}
    assert len(orders) == 6
    assert window_order(4, 2, 360) == window_order(4, 2, 360)


def test_token_file_samples_whole_windows_every_one_once_per_epoch(tmp_path: Path) -> None:
    source = TokenFile(write_tokens(tmp_path / "t.bin", list(range(41))), "uint16", vocab_size=100, window=4, seed=3)
    assert source.windows == 10
    windows = []
    for index in range(30):
        tokens = source.sample(index, 5).tolist()
        assert tokens == list(range(tokens[0], tokens[0] + 5))  # a window and the next token (its last target)
        windows.append(tokens[0] // 4)
    epochs = [windows[e * 10 : (e + 1) * 10] for e in range(3)]
    assert all(sorted(epoch) == list(range(10)) for epoch in epochs)
    assert epochs[0] != list(range(10)) and len({tuple(e) for e in epochs}) == 3  # shuffled, anew each epoch
    other = TokenFile(tmp_path / "t.bin", "uint16", vocab_size=100, window=4, seed=4)
    assert [int(other.sample(i, 1)[0]) // 4 for i in range(10)] != epochs[0]


def test_token_file_uint32_and_errors(tmp_path: Path) -> None:
    big = TokenFile(write_tokens(tmp_path / "u32.bin", [70_000] * 9, "I"), "uint32", vocab_size=70_001, window=4)
    assert big.sample(0, 5).tolist() == [70_000] * 5
    assert big.sample(0, 5).dtype == torch.int64
    with pytest.raises(ValueError, match="not a whole number"):
        TokenFile(write_tokens(tmp_path / "odd.bin", [1] * 9, "B"), "uint16", vocab_size=10, window=4)
    with pytest.raises(ValueError, match="fewer than one sequence"):
        TokenFile(write_tokens(tmp_path / "short.bin", [1] * 4), "uint16", vocab_size=10, window=4)
    oob = TokenFile(write_tokens(tmp_path / "oob.bin", [1, 2, 99, 3, 4]), "uint16", vocab_size=10, window=4)
    with pytest.raises(ValueError, match=r"token 99 .* >= --vocab-size 10"):
        oob.sample(0, 5)


# --- positions and ranks ----------------------------------------------------------------------------------


def test_rank_r_takes_the_samples_after_the_position_and_targets_shift_by_one() -> None:
    seen: list[int] = []
    rank0, rank1 = (BatchLoader(Recorder(seen), batch_size=3, seq_len=4, rank=r, world_size=2) for r in (0, 1))
    inputs, targets = rank1.next()
    assert inputs.tolist() == [[3] * 4, [4] * 4, [5] * 4] and targets.shape == (3, 4)
    rank0.next()
    assert seen == [3, 4, 5, 0, 1, 2] and rank0.position == rank1.position == 6
    rank0.next()
    assert seen[-3:] == [6, 7, 8]


def test_the_global_batch_is_the_same_however_it_is_split_over_ranks(tmp_path: Path) -> None:
    source = TokenFile(write_tokens(tmp_path / "t.bin", list(range(200))), "uint16", vocab_size=200, window=8, seed=1)
    whole = BatchLoader(source, batch_size=4, seq_len=8, rank=0, world_size=1)
    halves = [BatchLoader(source, batch_size=2, seq_len=8, rank=r, world_size=2) for r in (0, 1)]
    for _ in range(5):
        assert torch.equal(whole.next()[0], torch.cat([h.next()[0] for h in halves]))
    assert whole.position == halves[0].position == 20


@pytest.mark.parametrize(("before", "after"), [((2, 3), (4, 2)), ((4, 2), (2, 3)), ((1, 5), (3, 2)), ((3, 1), (1, 4))])
def test_a_resume_on_another_world_size_neither_replays_nor_skips(
    before: tuple[int, int], after: tuple[int, int]
) -> None:
    seen: list[int] = []
    position = 0
    for world_size, micro_steps in (before, after):
        loaders = [BatchLoader(Recorder(seen), 2, 4, rank, world_size) for rank in range(world_size)]
        for loader in loaders:
            loader.position = position  # what the checkpoint restores
        for _ in range(micro_steps):
            for loader in loaders:
                loader.next()
        assert len({loader.position for loader in loaders}) == 1  # every rank saves the same position
        position = loaders[0].position
    assert sorted(seen) == list(range(position))  # each global sample once, none skipped


def test_synthetic_batches_depend_only_on_seed_position_and_rank() -> None:
    def batch(seed: int, rank: int, position: int) -> list[list[int]]:
        loader = BatchLoader(SyntheticTokens(64, seed), batch_size=3, seq_len=8, rank=rank, world_size=2)
        loader.position = position
        return loader.next()[0].tolist()

    fresh = BatchLoader(SyntheticTokens(64, 7), batch_size=3, seq_len=8, rank=1, world_size=2)
    drawn = [fresh.next()[0].tolist() for _ in range(3)]
    assert fresh.position == 18
    assert drawn[2] == batch(7, 1, 12)  # resuming at a position replays exactly what was drawn there
    assert batch(7, 0, 12) != batch(7, 1, 12) and batch(8, 1, 12) != batch(7, 1, 12)
    row = torch.tensor(drawn[0][0])
    assert (row.diff() % 64 == row.diff()[0] % 64).all()  # a learnable arithmetic progression


# --- the sidecar ------------------------------------------------------------------------------------------


def sidecar(tmp_path: Path, **changes: object) -> Path:
    """A 41-token uint16 file and its `<file>.json`, with `changes` applied to the description."""
    path = write_tokens(tmp_path / "t.bin", list(range(41)))
    meta = {"dtype": "uint16", "vocab_size": 50, "tokens": 41, "documents": 1} | changes
    (tmp_path / "t.bin.json").write_text(json.dumps(meta))
    return path


def test_a_matching_sidecar_passes(tmp_path: Path) -> None:
    assert TokenFile(sidecar(tmp_path), "uint16", vocab_size=64, window=4).windows == 10


@pytest.mark.parametrize(("changes", "flags", "message"), [
    ({"dtype": "uint32"}, ("uint16", 64), "the tokens are uint32, not uint16: pass --data-dtype uint32"),
    ({}, ("uint16", 49), "the tokenizer has 50 ids, more than the model's vocabulary of 49 (--vocab-size or --model)"),
    ({"tokens": 80}, ("uint16", 64), "describes 80 tokens, but {file} has 82 bytes (a partial copy?)"),
    ({"tokens": None}, ("uint16", 64), "not a token file description (TypeError: "),
])  # fmt: skip
def test_a_sidecar_that_disagrees_is_an_error_naming_it(
    tmp_path: Path, changes: dict[str, object], flags: tuple[str, int], message: str
) -> None:
    path = sidecar(tmp_path, **changes)
    expected = f"{tmp_path / 't.bin.json'}: {message.format(file=path)}"
    with pytest.raises(ValueError, match=re.escape(expected)):
        TokenFile(path, flags[0], vocab_size=flags[1], window=4)


def test_the_sidecar_names_the_dtype_before_the_size_can_disagree_with_it(tmp_path: Path) -> None:
    path = sidecar(tmp_path)  # 82 bytes: not a whole number of uint32 tokens
    with pytest.raises(ValueError, match="the tokens are uint16, not uint32: pass --data-dtype uint16"):
        TokenFile(path, "uint32", vocab_size=64, window=4)


def test_a_sidecar_that_is_not_json_is_an_error_naming_it(tmp_path: Path) -> None:
    path = sidecar(tmp_path)
    (tmp_path / "t.bin.json").write_text("{")
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 't.bin.json'}: not a token file description")):
        TokenFile(path, "uint16", vocab_size=64, window=4)
