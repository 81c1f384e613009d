"""`slurm-eks data prepare` with tokenizers trained here (nothing downloads): the token file decodes back to
the documents in the seed's order, the dtype fits the vocabulary, the sidecar describes the file, errors are
one line with exit 2, and jobs/train.py trains on the result."""

from __future__ import annotations

import array
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from scripts.cli.main import app
from tests.conftest import require_module

tokenizers = require_module("tokenizers", "pip install -e '.[data]': slurm-eks data prepare needs it")

from scripts.data import prepare as prepare_module  # noqa: E402
from scripts.data.prepare import prepare  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EOS = "<eos>"
DOCS = [f"document {i}: the quick brown fox jumps over {i % 3} lazy dogs, ünïcode too.\nline two" for i in range(12)]


def save_tokenizer(tok: tokenizers.Tokenizer, directory: Path, eos: object) -> Path:
    """A Hugging Face tokenizer directory: tokenizer.json, and tokenizer_config.json naming `eos` unless None."""
    directory.mkdir()
    tok.save(str(directory / "tokenizer.json"))
    if eos is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps({"eos_token": eos}))
    return directory


def bpe(directory: Path, eos: str | None = EOS) -> Path:
    """Byte-level BPE (it decodes back to the exact text) with <eos> at id 1."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(DOCS, trainer)
    assert tok.get_vocab_size() == 300
    return save_tokenizer(tok, directory, eos and {"content": eos, "special": True})  # as Llama's configs write it


def word_level(directory: Path, size: int) -> Path:
    """Words w0 .. w{size-2} and <eos> last, so the largest id is size - 1."""
    from tokenizers import models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(size - 1)} | {EOS: size - 1}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return save_tokenizer(tok, directory, EOS)  # a plain string, as GPT-2's config writes it


def corpus(root: Path) -> tuple[list[Path], list[str]]:
    """Inputs (a directory of .txt files, one per document, and a .jsonl file) and the documents in input
    order: the directory's files sorted, then the JSONL lines."""
    texts = root / "texts"
    texts.mkdir()
    for i, doc in enumerate(DOCS[:5]):
        (texts / f"{i:02d}.txt").write_text(doc)
    (texts / "notes.md").write_text("not a document: directories give only .txt and .jsonl files")
    (texts / "blank.txt").write_text(" \n")  # whitespace only: no document
    lines = [json.dumps({"id": i, "text": doc}) for i, doc in enumerate(DOCS[5:])]
    (root / "more.jsonl").write_text("\n".join([*lines[:3], "", *lines[3:]]) + "\n")  # a blank line is skipped
    return [texts, root / "more.jsonl"], DOCS


def shuffled(docs: list[str], seed: int) -> list[str]:
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    return [docs[i] for i in order]


def read_tokens(path: Path, typecode: str = "H") -> list[int]:
    return array.array(typecode, path.read_bytes()).tolist()


def decoded(tokens: list[int], tokenizer_dir: Path) -> list[str]:
    """The documents of a token file, split at each <eos> (one ends every document)."""
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    eos = tok.token_to_id(EOS)
    assert tokens[-1] == eos
    docs, start = [], 0
    for i, token in enumerate(tokens):
        if token == eos:
            docs.append(tok.decode(tokens[start:i], skip_special_tokens=False))
            start = i + 1
    return docs


def run_cli(*args: str | Path) -> Result:
    return CliRunner().invoke(app, ["data", "prepare", *map(str, args)], env={"NO_COLOR": "1"})


def test_the_token_file_decodes_to_the_documents_in_the_seeds_order(tmp_path: Path) -> None:
    inputs, docs = corpus(tmp_path)
    tok = bpe(tmp_path / "tok")
    result = run_cli(*inputs, "--tokenizer", tok, "--out", tmp_path / "t.bin", "--seed", "3")
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "--data-dtype uint16 --vocab-size 300" in result.output
    assert decoded(read_tokens(tmp_path / "t.bin"), tok) == shuffled(docs, 3)
    assert not list(tmp_path.glob("*.partial"))


def test_documents_are_read_back_through_a_few_open_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepare_module, "_OPEN_FILES", 2)  # the shuffled order keeps reopening the 6 files
    inputs, docs = corpus(tmp_path)
    tok = bpe(tmp_path / "tok")
    assert decoded(read_tokens(prepare(inputs, tok, tmp_path / "t.bin", seed=2).out), tok) == shuffled(docs, 2)


def test_the_sidecar_describes_the_file_and_its_sources(tmp_path: Path) -> None:
    inputs, docs = corpus(tmp_path)
    tok = bpe(tmp_path / "tok")
    done = prepare(inputs, tok, tmp_path / "t.bin", seed=1)
    meta = json.loads((tmp_path / "t.bin.json").read_text())
    assert done.sidecar == tmp_path / "t.bin.json" and done.meta == meta
    tokenizer_sha = hashlib.sha256((tok / "tokenizer.json").read_bytes()).hexdigest()
    sources = [*sorted((tmp_path / "texts").glob("*.txt")), tmp_path / "more.jsonl"]
    assert meta == {
        "dtype": "uint16",
        "vocab_size": 300,
        "tokens": len(read_tokens(tmp_path / "t.bin")),
        "documents": len(docs),
        "eos_token": EOS,
        "eos_id": 1,
        "seed": 1,
        "text_field": "text",
        "split_lines": False,
        "tokenizer": {"path": str(tok.resolve()), "sha256": tokenizer_sha},
        "sources": [{"path": str(p.resolve()), "bytes": p.stat().st_size} for p in sources],
    }


def test_the_same_seed_gives_the_same_bytes_and_another_seed_another_order(tmp_path: Path) -> None:
    inputs, _ = corpus(tmp_path)
    tok = bpe(tmp_path / "tok")
    outputs = {name: prepare(inputs, tok, tmp_path / name, seed=seed).out.read_bytes()
               for name, seed in (("a", 0), ("b", 0), ("c", 1))}  # fmt: skip
    assert outputs["a"] == outputs["b"]
    assert outputs["a"] != outputs["c"] and sorted(outputs["a"]) == sorted(outputs["c"])


def test_split_lines_makes_each_line_a_document_and_jsonl_takes_the_text_field(tmp_path: Path) -> None:
    tok = bpe(tmp_path / "tok")
    (tmp_path / "lines.txt").write_text("first line\n\nsecond line\r\n   \nthird line")
    (tmp_path / "rows.jsonl").write_text('{"body": "from json", "text": 5}\n')
    done = prepare([tmp_path / "lines.txt", tmp_path / "rows.jsonl"], tok, tmp_path / "t.bin", text_field="body",
                   split_lines=True, seed=5)  # fmt: skip
    docs = ["first line", "second line", "third line", "from json"]
    assert done.meta["documents"] == 4
    assert decoded(read_tokens(done.out), tok) == shuffled(docs, 5)


def test_without_an_eos_token_the_documents_are_concatenated(tmp_path: Path) -> None:
    tok = bpe(tmp_path / "tok", eos=None)
    (tmp_path / "a.txt").write_text("hello world")
    done = prepare([tmp_path / "a.txt"], tok, tmp_path / "t.bin")
    assert done.meta["eos_token"] is None and done.meta["eos_id"] is None
    tokenizer = tokenizers.Tokenizer.from_file(str(tok / "tokenizer.json"))
    assert read_tokens(done.out) == tokenizer.encode("hello world").ids


@pytest.mark.parametrize(("size", "dtype", "typecode"), [(65_536, "uint16", "H"), (65_537, "uint32", "I")])
def test_uint16_while_every_id_fits_else_uint32(tmp_path: Path, size: int, dtype: str, typecode: str) -> None:
    tok = word_level(tmp_path / "tok", size)
    (tmp_path / "a.txt").write_text(f"w0 w7 w{size - 2}")
    done = prepare([tmp_path / "a.txt"], tok, tmp_path / "t.bin")
    assert (done.meta["dtype"], done.meta["vocab_size"]) == (dtype, size)
    assert read_tokens(done.out, typecode) == [0, 7, size - 2, size - 1]


def _errors(tmp_path: Path) -> dict[str, tuple[list[str | Path], str]]:
    """Each mistake: the CLI arguments after the inputs' setup, and the message."""
    tok = bpe(tmp_path / "tok")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notok").mkdir()
    (tmp_path / "blank.txt").write_text("\n")
    (tmp_path / "a.txt").write_text("text")
    (tmp_path / "a.csv").write_text("text")
    (tmp_path / "exists.bin").write_bytes(b"")
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": "unterminated\n')
    (tmp_path / "nofield.jsonl").write_text('{"text": "ok"}\n\n{"body": "x"}\n')
    (tmp_path / "list.jsonl").write_text('["text"]\n')
    (tmp_path / "latin1.txt").write_bytes("caf\u00e9".encode("latin-1"))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tokenizer.json").write_text("{}")
    save_tokenizer(tokenizers.Tokenizer.from_file(str(tok / "tokenizer.json")), tmp_path / "noeos", "</s>")
    out = tmp_path / "t.bin"
    return {
        "unloadable tokenizer.json": ([tmp_path / "a.txt", "--tokenizer", tmp_path / "broken", "--out", out],
                                      f"{tmp_path / 'broken' / 'tokenizer.json'}: cannot load: "),
        "EOS not in the vocabulary": ([tmp_path / "a.txt", "--tokenizer", tmp_path / "noeos", "--out", out],
                                      f"{tmp_path / 'noeos' / 'tokenizer_config.json'}: eos_token '</s>' is not in "
                                      f"{tmp_path / 'noeos' / 'tokenizer.json'}"),
        "no tokenizer.json": ([tmp_path / "a.txt", "--tokenizer", tmp_path / "notok", "--out", out],
                              f"{tmp_path / 'notok'}: no tokenizer.json (give a Hugging Face tokenizer directory)"),
        "no input files": ([tmp_path / "empty", "--tokenizer", tok, "--out", out],
                           f"no .txt or .jsonl files in {tmp_path / 'empty'}"),
        "only empty documents": ([tmp_path / "blank.txt", "--tokenizer", tok, "--out", out],
                                 "no documents in 1 input file(s): every one is empty"),
        "missing input": ([tmp_path / "gone.txt", "--tokenizer", tok, "--out", out],
                          f"{tmp_path / 'gone.txt'}: no such file or directory"),
        "unknown extension": ([tmp_path / "a.csv", "--tokenizer", tok, "--out", out],
                              f"{tmp_path / 'a.csv'}: unknown extension '.csv' (give .txt or .jsonl files)"),
        "missing out directory": ([tmp_path / "a.txt", "--tokenizer", tok, "--out", tmp_path / "no" / "t.bin"],
                                  f"--out {tmp_path / 'no' / 't.bin'}: the directory {tmp_path / 'no'} does not "
                                  "exist"),
        "existing out": ([tmp_path / "a.txt", "--tokenizer", tok, "--out", tmp_path / "exists.bin"],
                         f"--out {tmp_path / 'exists.bin'} exists (--force overwrites it and exists.bin.json)"),
        "bad JSON line": ([tmp_path / "bad.jsonl", "--tokenizer", tok, "--out", out],
                          f"{tmp_path / 'bad.jsonl'}:2: not JSON (Unterminated string starting at: line 1 column "
                          "10 (char 9))"),
        "missing field": ([tmp_path / "nofield.jsonl", "--tokenizer", tok, "--out", out],
                          f"{tmp_path / 'nofield.jsonl'}:3: no 'text' field (--text-field names another)"),
        "not an object": ([tmp_path / "list.jsonl", "--tokenizer", tok, "--out", out],
                          f"{tmp_path / 'list.jsonl'}:1: a list, not a JSON object"),
        "not UTF-8": ([tmp_path / "latin1.txt", "--tokenizer", tok, "--out", out],
                      f"{tmp_path / 'latin1.txt'}: not UTF-8 (byte 3: unexpected end of data)"),
    }


def test_each_mistake_is_one_line_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    for name, (args, message) in _errors(tmp_path).items():
        result = run_cli(*args)
        assert result.exit_code == 2 and result.stderr.startswith(f"error: {message}"), (name, result.stderr)
        assert result.stderr.count("\n") == 1, name
        assert not (tmp_path / "t.bin").exists() and not list(tmp_path.glob("*.partial")), name


def test_force_overwrites_an_existing_file(tmp_path: Path) -> None:
    tok = bpe(tmp_path / "tok")
    (tmp_path / "a.txt").write_text("text")
    (tmp_path / "t.bin").write_bytes(b"old")
    assert run_cli(tmp_path / "a.txt", "--tokenizer", tok, "--out", tmp_path / "t.bin", "--force").exit_code == 0
    assert decoded(read_tokens(tmp_path / "t.bin"), tok) == ["text"]


@pytest.mark.torch
def test_train_py_trains_on_a_prepared_file(tmp_path: Path) -> None:
    require_module("torch", "pip install -e '.[jobs]': jobs/train.py needs it")
    inputs, _ = corpus(tmp_path)
    done = prepare(inputs, bpe(tmp_path / "tok"), tmp_path / "t.bin")
    flags = ["--data", str(done.out), "--vocab-size", str(done.meta["vocab_size"]), "--seq-len", "16",
             "--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--steps", "3", "--warmup-steps", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(REPO / "jobs" / "train.py"), *flags], capture_output=True, text=True,
                         env=env, timeout=300, cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert events[0]["event"] == "start" and events[0]["data"] == str(done.out)
    assert events[-1]["event"] == "done" and events[-1]["step"] == 3
