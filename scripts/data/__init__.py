"""Training data: `prepare.py` tokenizes text and JSONL documents with a Hugging Face tokenizer into the flat
token files `jobs/train.py --data` reads. Needs the `data` extra (tokenizers); never imports `scripts.cli`.
"""
