"""Tiny BERT pre-training data in the tutorial's HDF5 format, and a tiny BertConfig, for the recipe's tests: made
here with h5py, the same library the recipe reads them with, so nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

VOCAB, SEQ, MAX_PRED = 64, 16, 3
CONFIG = {"model_type": "bert", "vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}


def write_config(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(CONFIG))
    return directory


def write_shards(directory: Path, shards: int = 2, sequences: int = 64, seed: int = 0,
                 drop: str | None = None) -> Path:
    """Patterned sequences ([CLS]=1 A [SEP]=2 B [SEP]), 2 or 3 masked positions each (0-padded), half the pairs
    random; `drop` leaves one key out of every shard."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        ids = (np.arange(SEQ)[None, :] * 3 + np.arange(sequences)[:, None]) % (VOCAB - 8) + 8
        ids[:, 0], ids[:, SEQ // 2], ids[:, -1] = 1, 2, 2
        segments = np.zeros((sequences, SEQ), dtype=np.int64)
        segments[:, SEQ // 2 + 1:] = 1
        positions = np.zeros((sequences, MAX_PRED), dtype=np.int64)
        masked = np.zeros((sequences, MAX_PRED), dtype=np.int64)
        for i in range(sequences):
            chosen = np.sort(rng.choice(np.arange(3, SEQ // 2), size=2 + i % 2, replace=False))
            positions[i, : len(chosen)] = chosen
            masked[i, : len(chosen)] = ids[i, chosen]
            ids[i, chosen] = 3  # [MASK]
        arrays = {"input_ids": ids, "segment_ids": segments, "input_mask": np.ones_like(ids),
                  "masked_lm_positions": positions, "masked_lm_ids": masked,
                  "next_sentence_labels": (np.arange(sequences) % 2).astype(np.int64)}
        with h5py.File(directory / f"shard_{s:02d}.hdf5", "w") as f:
            for key, value in arrays.items():
                if key != drop:
                    f.create_dataset(key, data=value)
    return directory
