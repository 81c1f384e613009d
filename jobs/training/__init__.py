"""The pieces of the resumable torchrun training entry point (`jobs/train.py`), one job per module."""
