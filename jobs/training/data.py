"""Token batches from a memory-mapped token file or a synthetic stream, addressed by a resumable position.

`BatchLoader.position` counts the samples all ranks have consumed together. In each micro-step rank r
takes global samples position + r * batch_size + row, and the position then moves on by world_size *
batch_size, so the global indices consumed form one contiguous range: a resume on another world size neither
replays nor skips a sample, and a batch depends only on (seed, position, rank).
"""

from __future__ import annotations

import functools
import json
import math
import random
from pathlib import Path
from typing import Protocol

import torch

_DTYPES = {"uint16": torch.uint16, "uint32": torch.uint32}
_MIX = 0x9E3779B97F4A7C15  # golden-ratio constant: spreads (seed, index) pairs over the 63-bit seed space


class TokenSource(Protocol):
    vocab_size: int

    def sample(self, index: int, length: int) -> torch.Tensor:
        """`length` tokens (int64) of global sample `index`."""
        ...


class SyntheticTokens:
    """Learnable sequences x[t] = (start + t * stride) mod vocab, with start/stride drawn per sample."""

    def __init__(self, vocab_size: int, seed: int) -> None:
        self.vocab_size = vocab_size
        self.seed = seed
        self._gen = torch.Generator()

    def sample(self, index: int, length: int) -> torch.Tensor:
        self._gen.manual_seed((self.seed * _MIX + index) % (1 << 63))
        start, stride = torch.randint(0, self.vocab_size, (2,), generator=self._gen).tolist()
        return (start + (1 + stride % 7) * torch.arange(length)) % self.vocab_size


@functools.lru_cache(maxsize=4)
def window_order(seed: int, epoch: int, windows: int) -> tuple[int, int]:
    """(a, b) of one epoch's window order, i -> (a * i + b) mod windows: a bijection, since gcd(a, windows) = 1.

    An affine order costs O(1) memory and time at any corpus size, where a stored permutation would cost 8
    bytes a window. It is far from uniformly random (consecutive samples lie a fixed stride apart), which is
    enough here: `slurm-eks data prepare` already shuffled the documents, and every epoch draws a new (a, b).
    """
    rng = random.Random(f"{seed}/{epoch}")  # a str seed is hashed (SHA-512): the same on every Python
    while True:
        a = rng.randrange(windows)
        if math.gcd(a, windows) == 1:
            return a, rng.randrange(windows)


class TokenFile:
    """A flat binary file of token ids (uint16 or uint32), mapped lazily and cut into windows of `window`
    tokens, each read with the next token as its last target. Sample i is window (a * i + b) mod windows
    of epoch i // windows (`window_order`): every window once per epoch, in a seeded order per epoch.

    When `slurm-eks data prepare`'s sidecar `<path>.json` is present, its dtype, vocabulary size and token
    count are checked against the flags and the file."""

    def __init__(self, path: Path, dtype: str, vocab_size: int, window: int, *, seed: int = 0) -> None:
        nbytes = path.stat().st_size
        _check_sidecar(path, dtype, vocab_size, nbytes)  # first: a wrong --data-dtype gets the clearest message
        size, remainder = divmod(nbytes, _DTYPES[dtype].itemsize)
        if remainder:
            raise ValueError(f"{path}: {nbytes} bytes is not a whole number of {dtype} tokens")
        self.windows = (size - 1) // window  # each window overlaps the next by one token (the last target)
        if self.windows < 1:
            raise ValueError(f"{path}: {size} tokens is fewer than one sequence of {window + 1}")
        self.vocab_size = vocab_size
        self.window = window
        self.seed = seed
        self.path = path
        self._tokens = torch.from_file(str(path), shared=False, size=size, dtype=_DTYPES[dtype])

    def sample(self, index: int, length: int) -> torch.Tensor:
        epoch, i = divmod(index, self.windows)
        a, b = window_order(self.seed, epoch, self.windows)
        start = (a * i + b) % self.windows * self.window
        tokens = self._tokens[start : start + length].to(torch.int64)
        if int(tokens.max()) >= self.vocab_size:
            raise ValueError(
                f"{self.path}: token {int(tokens.max())} near offset {start} is >= --vocab-size {self.vocab_size}"
            )
        return tokens


def _check_sidecar(path: Path, dtype: str, vocab_size: int, nbytes: int) -> None:
    sidecar = path.with_name(path.name + ".json")
    if not sidecar.is_file():
        return
    try:
        meta = json.loads(sidecar.read_text())
        meta_dtype, meta_vocab, meta_tokens = meta["dtype"], int(meta["vocab_size"]), int(meta["tokens"])
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"{sidecar}: not a token file description ({type(exc).__name__}: {exc})") from None
    if meta_dtype != dtype:
        raise ValueError(f"{sidecar}: the tokens are {meta_dtype}, not {dtype}: pass --data-dtype {meta_dtype}")
    if meta_vocab > vocab_size:
        raise ValueError(f"{sidecar}: the tokenizer has {meta_vocab} ids, more than the model's vocabulary of "
                         f"{vocab_size} (--vocab-size or --model)")
    if meta_tokens * _DTYPES[dtype].itemsize != nbytes:
        raise ValueError(f"{sidecar}: describes {meta_tokens} tokens, but {path} has {nbytes} bytes (a partial copy?)")


class BatchLoader:
    """(inputs, targets) micro-batches for one rank; `position` counts the samples all ranks have drawn."""

    def __init__(self, source: TokenSource, batch_size: int, seq_len: int, rank: int, world_size: int) -> None:
        self.source = source
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.rank = rank
        self.world_size = world_size
        self.position = 0

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        first = self.position + self.rank * self.batch_size
        rows = [self.source.sample(first + row, self.seq_len + 1) for row in range(self.batch_size)]
        self.position += self.world_size * self.batch_size
        batch = torch.stack(rows)
        return batch[:, :-1], batch[:, 1:]
