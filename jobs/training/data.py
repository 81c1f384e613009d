"""Token batches from a memory-mapped token file or a synthetic stream, addressed by a resumable position.

Every sequence has a global sample index, ((position * world_size + rank) * batch_size + row), so a
batch depends only on (seed, position, rank) and resuming needs nothing but the saved position.
"""

from __future__ import annotations

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


class TokenFile:
    """A flat binary file of token ids (e.g. uint16), mapped lazily and read in consecutive windows."""

    def __init__(self, path: Path, dtype: str, vocab_size: int, window: int) -> None:
        itemsize = _DTYPES[dtype].itemsize
        size, remainder = divmod(path.stat().st_size, itemsize)
        if remainder:
            raise ValueError(f"{path}: {path.stat().st_size} bytes is not a whole number of {dtype} tokens")
        self.windows = (size - 1) // window  # each window overlaps the next by one token (the last target)
        if self.windows < 1:
            raise ValueError(f"{path}: {size} tokens is fewer than one sequence of {window + 1}")
        self.vocab_size = vocab_size
        self.window = window
        self.path = path
        self._tokens = torch.from_file(str(path), shared=False, size=size, dtype=_DTYPES[dtype])

    def sample(self, index: int, length: int) -> torch.Tensor:
        start = (index % self.windows) * self.window
        tokens = self._tokens[start : start + length].to(torch.int64)
        if int(tokens.max()) >= self.vocab_size:
            raise ValueError(
                f"{self.path}: token {int(tokens.max())} near offset {start} is >= --vocab-size {self.vocab_size}"
            )
        return tokens


class BatchLoader:
    """(inputs, targets) micro-batches for one rank; `position` counts the micro-batches drawn so far."""

    def __init__(self, source: TokenSource, batch_size: int, seq_len: int, rank: int, world_size: int) -> None:
        self.source = source
        self.batch_size = batch_size
        self.seq_len = seq_len
        self.rank = rank
        self.world_size = world_size
        self.position = 0

    def next(self) -> tuple[torch.Tensor, torch.Tensor]:
        first = (self.position * self.world_size + self.rank) * self.batch_size
        rows = [self.source.sample(first + row, self.seq_len + 1) for row in range(self.batch_size)]
        self.position += 1
        batch = torch.stack(rows)
        return batch[:, :-1], batch[:, 1:]
