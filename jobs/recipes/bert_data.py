"""BERT pre-training examples from HDF5 shards in the format of NVIDIA's and AWS's BERT pre-training data (the
Neuron tutorial's dp_bert_large_hf_pretrain_hdf5.py reads the same): each shard holds, per sequence,

- input_ids, segment_ids, input_mask: [n, seq_len] integers (tokens, sentence A/B, 1 for real tokens);
- masked_lm_positions, masked_lm_ids: [n, max_pred] (where the masked tokens are, and what they were; padded
  with position 0, which is [CLS] and never masked);
- next_sentence_labels: [n] (0: B follows A, 1: B is random).

Each example becomes BertForPreTraining's inputs: the masked-LM labels are -100 (ignored) except at the masked
positions, as the tutorial builds them. h5py reads the files (a well-kept library: HDF5 is not ours to parse).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

KEYS = ("input_ids", "segment_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels")
SUFFIXES = (".hdf5", ".h5")
IGNORE = -100  # the label torch's cross-entropy (and BertForPreTraining's loss) skips


class DataError(ValueError):
    """Shards that are not in the expected format; the message names the file and what is wrong."""


def _load(path: Path, max_pred: int, vocab_size: int) -> dict[str, np.ndarray]:
    try:
        with h5py.File(path, "r") as f:
            missing = [k for k in KEYS if k not in f]
            if missing:
                raise DataError(f"{path}: no {', '.join(missing)} (a shard holds {', '.join(KEYS)})")
            arrays = {k: np.asarray(f[k][:]) for k in KEYS}
    except OSError as error:
        raise DataError(f"{path}: not an HDF5 file ({error})") from None
    n, seq_len = arrays["input_ids"].shape
    for key in ("segment_ids", "input_mask"):
        if arrays[key].shape != (n, seq_len):
            raise DataError(f"{path}: {key} is {arrays[key].shape}, input_ids {(n, seq_len)}")
    for key in ("masked_lm_positions", "masked_lm_ids"):
        if arrays[key].shape != (n, max_pred):
            raise DataError(f"{path}: {key} is {arrays[key].shape}, not ({n}, {max_pred}): give --max-pred-length "
                            f"{arrays[key].shape[-1]} (20 in phase 1, 80 in phase 2) if the shards are right")
    if arrays["next_sentence_labels"].shape[0] != n:
        raise DataError(f"{path}: next_sentence_labels holds {arrays['next_sentence_labels'].shape[0]} labels for "
                        f"{n} sequences")
    if arrays["input_ids"].max(initial=0) >= vocab_size or arrays["masked_lm_ids"].max(initial=0) >= vocab_size:
        raise DataError(f"{path}: token ids reach {int(arrays['input_ids'].max())}, beyond the model's vocabulary "
                        f"of {vocab_size}: the shards were made with another tokenizer")
    if arrays["masked_lm_positions"].max(initial=0) >= seq_len:
        raise DataError(f"{path}: masked positions reach past the {seq_len}-token sequences")
    return arrays


class PretrainingShards(Dataset):
    """Every sequence of every shard in `directory`, in file-name order."""

    def __init__(self, directory: Path, max_pred: int, vocab_size: int) -> None:
        files = sorted(p for p in directory.iterdir() if p.suffix in SUFFIXES)
        if not files:
            raise DataError(f"{directory}: no HDF5 shards ({' or '.join('*' + s for s in SUFFIXES)})")
        shards = [_load(p, max_pred, vocab_size) for p in files]
        lengths = {s["input_ids"].shape[1] for s in shards}
        if len(lengths) != 1:
            raise DataError(f"{directory}: shards of sequence lengths {sorted(lengths)}; one phase at a time")
        self.seq_len = lengths.pop()
        self.arrays = {k: np.concatenate([s[k] for s in shards]) for k in KEYS}

    def __len__(self) -> int:
        return int(self.arrays["input_ids"].shape[0])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        a = {k: torch.as_tensor(v[index], dtype=torch.long) for k, v in self.arrays.items()}
        labels = torch.full((self.seq_len,), IGNORE, dtype=torch.long)
        positions, ids = a["masked_lm_positions"], a["masked_lm_ids"]
        used = positions != 0  # padding
        labels[positions[used]] = ids[used]
        return {"input_ids": a["input_ids"], "token_type_ids": a["segment_ids"], "attention_mask": a["input_mask"],
                "labels": labels, "next_sentence_label": a["next_sentence_labels"].reshape(())}
