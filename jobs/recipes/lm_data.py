"""Causal-LM training examples from a local file: JSON lines or plain text (tokenized here, documents joined
with the end-of-sequence token and cut into blocks), or a flat token file as jobs/train.py reads it."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch.utils.data import Dataset

from jobs.training.data import TokenFile

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

TEXT_SUFFIXES = (".jsonl", ".txt")
TOKEN_SUFFIX = ".bin"


class Blocks(Dataset[dict[str, torch.Tensor]]):
    """`count` examples of one block of tokens each; the labels are the inputs (the model shifts them)."""

    def __init__(self, block: Callable[[int], torch.Tensor], count: int) -> None:
        self.block = block
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids = self.block(index)
        return {"input_ids": ids, "labels": ids.clone()}


def read_texts(path: Path, text_field: str) -> list[str]:
    """The documents of a .jsonl file (field `text_field` of each line) or a .txt file (one per line)."""
    lines = [(n, line) for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]
    if path.suffix == ".txt":
        return [line for _, line in lines]
    texts = []
    for n, line in lines:
        record = json.loads(line)
        if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
            raise ValueError(f"{path}:{n}: no string field {text_field!r} (give the field with --text-field)")
        texts.append(record[text_field])
    return texts


def _slice(tokens: torch.Tensor, length: int, index: int) -> torch.Tensor:
    return tokens[index * length : (index + 1) * length]


def _window(source: TokenFile, length: int, index: int) -> torch.Tensor:
    return source.sample(index, length)


def load_blocks(
    path: Path, length: int, tokenizer: PreTrainedTokenizerBase | None, vocab_size: int, text_field: str,
    data_dtype: str,
) -> Blocks:  # fmt: skip
    """Blocks of `length` tokens from `path`: a .jsonl or .txt file (needs `tokenizer`), or a .bin token file."""
    if path.suffix == TOKEN_SUFFIX:
        # checks the ids (and the sidecar of `slurm-eks data prepare`, if any) against the model's vocabulary
        source = TokenFile(path, data_dtype, vocab_size, length)
        return Blocks(partial(_window, source, length), source.windows)
    if path.suffix not in TEXT_SUFFIXES:
        raise ValueError(f"{path}: give a .jsonl, .txt or {TOKEN_SUFFIX} (token ids) file")
    assert tokenizer is not None, "text needs the model's tokenizer"
    ids: list[int] = []
    for doc in tokenizer(read_texts(path, text_field), add_special_tokens=False)["input_ids"]:
        ids.extend(doc)
        if tokenizer.eos_token_id is not None:
            ids.append(tokenizer.eos_token_id)
    count = len(ids) // length
    if count == 0:
        raise ValueError(f"{path}: {len(ids)} tokens is less than one block of --max-seq-length {length}")
    return Blocks(partial(_slice, torch.tensor(ids, dtype=torch.long), length), count)
