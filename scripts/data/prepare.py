"""`slurm-eks data prepare`: documents tokenized into the token file `jobs/train.py --data` memory-maps.

The output is a flat array of token ids in native byte order (little-endian on x86-64 and Arm64), uint16
when every id fits, else uint32, with the tokenizer's EOS token after each document; `<out>.json` beside
it describes it (dtype, vocabulary, counts, tokenizer and sources) and `jobs/training/data.py` checks it.

Two passes keep memory independent of the corpus: the first validates every document and records where its
bytes are (20 bytes a document); the second reads the documents back in a seeded shuffled order, tokenizes
them a batch at a time and appends the ids to the file.
"""

from __future__ import annotations

import hashlib
import json
import random
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from tokenizers import Tokenizer

_SUFFIXES = (".txt", ".jsonl")
_UINT16_IDS = 1 << 16
_BATCH = 256  # documents per encode_batch_fast call: long enough for its threads, short enough for memory
_OPEN_FILES = 64  # the shuffled order jumps between files: keep the recent ones open


class PrepareError(ValueError):
    """Why the token file cannot be made, in one line."""


@dataclass(frozen=True)
class Prepared:
    out: Path
    sidecar: Path
    meta: dict[str, Any]  # what the sidecar holds


def _sidecar_path(out: Path) -> Path:
    return out.with_name(out.name + ".json")


@dataclass(frozen=True)
class _Tokenizer:
    tokenizer: Tokenizer
    vocab_size: int  # the largest id + 1, added tokens included: what the model's embedding must cover
    eos: str | None
    eos_id: int | None
    sha256: str


def _load_tokenizer(directory: Path) -> _Tokenizer:
    """`directory/tokenizer.json`, with the EOS token named by `tokenizer_config.json` (none without it)."""
    path = directory / "tokenizer.json"
    if not path.is_file():
        raise PrepareError(f"{directory}: no tokenizer.json (give a Hugging Face tokenizer directory)")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for any bad file
        raise PrepareError(f"{path}: cannot load: {_one_line(exc)}") from None
    eos = _eos_token(directory / "tokenizer_config.json")
    eos_id = None if eos is None else tokenizer.token_to_id(eos)
    if eos is not None and eos_id is None:
        raise PrepareError(f"{directory / 'tokenizer_config.json'}: eos_token {eos!r} is not in {path}")
    vocab_size = max(tokenizer.get_vocab(with_added_tokens=True).values(), default=-1) + 1
    return _Tokenizer(tokenizer, vocab_size, eos, eos_id, hashlib.sha256(path.read_bytes()).hexdigest())


def _eos_token(config: Path) -> str | None:
    if not config.is_file():
        return None
    try:
        eos = json.loads(config.read_text()).get("eos_token")
    except (ValueError, AttributeError) as exc:
        raise PrepareError(f"{config}: not a JSON object ({_one_line(exc)})") from None
    if isinstance(eos, dict):  # an AddedToken written out: {"content": "</s>", ...}
        eos = eos.get("content")
    if eos is not None and not isinstance(eos, str):
        raise PrepareError(f"{config}: eos_token is {eos!r}, not a token")
    return eos


def _find_sources(inputs: list[Path]) -> list[Path]:
    """Named files, and the .txt and .jsonl files under named directories (sorted), each once."""
    found: dict[Path, Path] = {}
    for item in inputs:
        if item.is_dir():
            files = sorted(p for p in item.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
        elif item.is_file():
            if item.suffix not in _SUFFIXES:
                raise PrepareError(f"{item}: unknown extension {item.suffix!r} (give .txt or .jsonl files)")
            files = [item]
        else:
            raise PrepareError(f"{item}: no such file or directory")
        for path in files:
            found.setdefault(path.resolve(), path)
    if not found:
        raise PrepareError(f"no .txt or .jsonl files in {' '.join(map(str, inputs))}")
    return list(found.values())


@dataclass
class _Index:
    """Where each document's bytes are: source number, byte offset, byte length."""

    files: array[int] = field(default_factory=lambda: array("I"))
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    lengths: array[int] = field(default_factory=lambda: array("Q"))

    def add(self, file: int, offset: int, length: int) -> None:
        self.files.append(file)
        self.offsets.append(offset)
        self.lengths.append(length)


def _text(path: Path, line: int | None, raw: bytes, text_field: str | None) -> str:
    """A document's text from its bytes: the bytes themselves, or `text_field` of a JSON object."""
    where = f"{path}:{line}" if line is not None else str(path)
    try:
        if text_field is None:
            return raw.decode()
        value = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise PrepareError(f"{where}: not UTF-8 (byte {exc.start}: {exc.reason})") from None
    except ValueError as exc:
        raise PrepareError(f"{where}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise PrepareError(f"{where}: a {type(value).__name__}, not a JSON object")
    if text_field not in value:
        raise PrepareError(f"{where}: no {text_field!r} field (--text-field names another)")
    if not isinstance(value[text_field], str):
        raise PrepareError(f"{where}: {text_field!r} is a {type(value[text_field]).__name__}, not a string")
    return value[text_field]


def _json_field(path: Path, text_field: str) -> str | None:
    return text_field if path.suffix == ".jsonl" else None


def _index_documents(sources: list[Path], text_field: str, split_lines: bool) -> _Index:
    """Validate every document and record its bytes: a .txt file is one document (one a line with
    `split_lines`), a .jsonl line one; blank lines and documents of only whitespace are left out."""
    index = _Index()
    for number, path in enumerate(sources):
        if path.suffix == ".txt" and not split_lines:
            if _text(path, None, path.read_bytes(), None).strip():
                index.add(number, 0, path.stat().st_size)
            continue
        offset = 0
        with path.open("rb") as f:
            for line_no, line in enumerate(f, 1):
                body = line.rstrip(b"\r\n")
                if body.strip() and _text(path, line_no, body, _json_field(path, text_field)).strip():
                    index.add(number, offset, len(body))
                offset += len(line)
    return index


class _Reader:
    """Documents read back by byte range, with the most recently used files kept open."""

    def __init__(self, sources: list[Path], index: _Index, text_field: str) -> None:
        self.sources, self.index, self.text_field = sources, index, text_field
        self._open: OrderedDict[int, BinaryIO] = OrderedDict()

    def text(self, doc: int) -> str:
        number = self.index.files[doc]
        handle = self._open.pop(number, None) or self.sources[number].open("rb")
        self._open[number] = handle
        if len(self._open) > _OPEN_FILES:
            self._open.popitem(last=False)[1].close()
        handle.seek(self.index.offsets[doc])
        raw = handle.read(self.index.lengths[doc])
        return _text(self.sources[number], None, raw, _json_field(self.sources[number], self.text_field))

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *_: object) -> None:
        for handle in self._open.values():
            handle.close()


def _check_out(out: Path, force: bool) -> None:
    if not out.parent.is_dir():
        raise PrepareError(f"--out {out}: the directory {out.parent} does not exist")
    if out.is_dir():
        raise PrepareError(f"--out {out} is a directory; give a file name")
    if not force and (out.exists() or _sidecar_path(out).exists()):
        raise PrepareError(f"--out {out} exists (--force overwrites it and {_sidecar_path(out).name})")


def prepare(
    inputs: list[Path],
    tokenizer_dir: Path,
    out: Path,
    *,
    text_field: str = "text",
    split_lines: bool = False,
    seed: int = 0,
    force: bool = False,
) -> Prepared:
    """Tokenize the documents of `inputs` in a shuffled order (the same for the same seed and inputs) into
    `out` and its sidecar. Both are written under temporary names and renamed at the end, so an interrupted
    run leaves no file that looks complete."""
    tok = _load_tokenizer(tokenizer_dir)
    _check_out(out, force)
    sources = _find_sources(inputs)
    index = _index_documents(sources, text_field, split_lines)
    documents = len(index.files)
    if not documents:
        raise PrepareError(f"no documents in {len(sources)} input file(s): every one is empty")
    order = array("Q", range(documents))
    random.Random(seed).shuffle(order)

    dtype, typecode = ("uint16", "H") if tok.vocab_size <= _UINT16_IDS else ("uint32", "I")
    tail = [] if tok.eos_id is None else [tok.eos_id]
    partial, sidecar_partial = out.with_name(out.name + ".partial"), out.with_name(out.name + ".json.partial")
    tokens = 0
    try:
        with partial.open("wb") as f, _Reader(sources, index, text_field) as reader:
            for start in range(0, documents, _BATCH):
                texts = [reader.text(doc) for doc in order[start : start + _BATCH]]
                for encoding in tok.tokenizer.encode_batch_fast(texts, add_special_tokens=False):
                    ids = array(typecode, encoding.ids + tail)
                    f.write(ids.tobytes())
                    tokens += len(ids)
        meta = {
            "dtype": dtype,
            "vocab_size": tok.vocab_size,
            "tokens": tokens,
            "documents": documents,
            "eos_token": tok.eos,
            "eos_id": tok.eos_id,
            "seed": seed,
            "text_field": text_field,
            "split_lines": split_lines,
            "tokenizer": {"path": str(tokenizer_dir.resolve()), "sha256": tok.sha256},
            "sources": [{"path": str(p.resolve()), "bytes": p.stat().st_size} for p in sources],
        }
        sidecar_partial.write_text(json.dumps(meta, indent=2) + "\n")
        partial.replace(out)
        sidecar_partial.replace(_sidecar_path(out))
    finally:
        partial.unlink(missing_ok=True)
        sidecar_partial.unlink(missing_ok=True)
    return Prepared(out, _sidecar_path(out), meta)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
