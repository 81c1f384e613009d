"""Recipes launched by the same job scripts as jobs/train.py, on libraries the entry point does without:
a Hugging Face Trainer fine-tune (transformers, peft, DeepSpeed) and its DeepSpeed config.
`pip install -e '.[recipes]'` installs them."""
