"""A tiny Llama with a tokenizer trained here, and a JSONL corpus, in a temporary directory: the recipe's
tests load nothing from the network."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported: a test that reaches for the Hub fails
RECIPE_DEPS = "pip install -e '.[recipes,data]': the recipe's tests need it"

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
