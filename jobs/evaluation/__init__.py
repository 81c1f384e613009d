"""Evaluation after training (jobs/evaluate.py): perplexity of a jobs/train.py checkpoint on held-out tokens,
lm-evaluation-harness tasks on Hugging Face-format models, the metrics as JSON beside the checkpoint, and a model
version in the cluster's MLflow registry with its lineage."""
