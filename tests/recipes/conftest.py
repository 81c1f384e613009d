"""A tiny Llama with a tokenizer trained here, and a JSONL corpus, in a temporary directory: the recipe's
tests load nothing from the network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_module

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: a test that reaches for the Hub fails
RECIPE_DEPS = "pip install -e '.[recipes,data]': the recipe's tests need it"
# DeepSpeed's JIT ops (torch.utils.cpp_extension) build into TORCH_EXTENSIONS_DIR under a lock file that a killed
# build leaves behind, and the next build waits on it forever (FileBaton.wait has no timeout): that hung a CI
# run. The tests' own directory, which only this session's DeepSpeed runs use (one test module, one xdist worker).
EXTENSIONS_DIR = Path(__file__).resolve().parents[2] / "build" / "torch_extensions"
os.environ["TORCH_EXTENSIONS_DIR"] = str(EXTENSIONS_DIR)
# deepspeed_shm_comm (the CPU accelerator's shared-memory collectives) compiles in about 6 minutes here.
OPS_BUILD_TIMEOUT_S = 1800

WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "cats", "watch",
         "from", "the", "old", "stone", "wall"]
SPECIALS = ["<unk>", "<s>", "</s>"]


def corpus(docs: int = 240) -> list[str]:
    """Repetitive sentences, so a few steps visibly lower the loss."""
    return [" ".join(WORDS[(i * 3 + j) % len(WORDS)] for j in range(10 + i % 5)) for i in range(docs)]


def build_tiny_llama(root: Path) -> Path:
    """A 2-layer Llama (hidden 32) and a byte-level BPE tokenizer trained on `corpus()`, saved as a local
    model directory, with the corpus beside it as data.jsonl."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    texts = corpus()
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=96, special_tokens=SPECIALS, initial_alphabet=[]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                        pad_token="</s>")  # fmt: skip
    model_dir = root / "tiny-llama"
    tokenizer.save_pretrained(model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         attention_dropout=0.1,  # dropout: the resume must restore every rank's RNG
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(model_dir)
    (root / "data.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return model_dir


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model directory; its corpus is `tiny_llama.parent / "data.jsonl"`."""
    return build_tiny_llama(tmp_path_factory.mktemp("recipes"))


@pytest.fixture(scope="session")
def deepspeed_ops() -> Path:
    """DeepSpeed's shared-memory collectives built before any timed run: a lock left by an earlier killed
    build is removed first (nothing else builds into EXTENSIONS_DIR), and a build cut short here removes its
    own lock, so no run waits on a dead one."""
    require_module("deepspeed", RECIPE_DEPS)
    EXTENSIONS_DIR.mkdir(parents=True, exist_ok=True)
    for lock in EXTENSIONS_DIR.glob("*/lock"):
        lock.unlink()
    code = "from deepspeed.comm.torch import build_shm_op; build_shm_op()"
    try:
        built = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=OPS_BUILD_TIMEOUT_S)
    finally:
        for lock in EXTENSIONS_DIR.glob("*/lock"):
            lock.unlink()
    assert built.returncode == 0, built.stderr[-4000:]
    return EXTENSIONS_DIR
