"""Whether a `jobs/train.py` command fits a partition: advise's memory model (scripts/advise/memory.py) applied to
the layout the command's own flags give on `--nodes` nodes, so `job render` refuses what `advise` says cannot run
(plain DDP for Llama 3 8B needs 188.8 GiB a GPU) before it waits in a queue and dies at its first step.

Only the flags that decide memory are read, with jobs/train.py's defaults (jobs/training/config.py; a test holds
the two to each other: the training config imports torch, which the login pod's CLI has not). Presets only: a
custom shape (`--d-model` ...) is the entry point's to check. On Trainium the same model as advise's (PyTorch's
accounting; the Neuron compiler plans device memory itself, docs/trainium.md), so the two agree there too.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from jobs.training.presets import PRESETS
from scripts.advise.hardware import Partition
from scripts.advise.memory import Layout, Memory, host_memory_gib, memory

# jobs/train.py's defaults for the flags read here (jobs/training/config.py build_parser).
TRAIN_DEFAULTS = {"seq_len": 128, "batch_size": 8, "grad_accum": 1, "tp": 1, "pp": 1, "dp_replicate": 1, "ac_every": 1}


@dataclass(frozen=True)
class EntryFit:
    model: str
    layout: Layout
    memory: Memory
    device_gib: float
    host_gib: float
    node_host_gib: float
    seq_len: int

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.device_gib and self.host_gib <= self.node_host_gib

    def problem(self, device_word: str) -> str:
        """What does not fit, with the numbers."""
        m, layout = self.memory, self.layout
        what = (f"jobs/train.py --model {self.model} as {layout.describe()} on {layout.nodes} node(s), micro-batch "
                f"{layout.micro_batch} of {self.seq_len} tokens"
                f"{_checkpointing(layout)}")  # fmt: skip
        if m.total > self.device_gib:
            return (f"{what} needs {m.total:.1f} GiB per {device_word} of {self.device_gib:g} (model state "
                    f"{m.weights + m.gradients + m.optimizer:.1f}, activations {m.activations:.1f}, allowance "
                    f"{m.reserve:.1f}; scripts/advise/memory.py)")  # fmt: skip
        return f"{what} needs {self.host_gib:.0f} GiB of host memory per node of the {self.node_host_gib:.0f} there"


def _checkpointing(layout: Layout) -> str:
    if not layout.activation_checkpointing:
        return ""
    every = f" of every {layout.ac_every}th layer" if layout.ac_every > 1 else ""
    return f", activation checkpointing{every}"


def _flags(entry: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--model")
    parser.add_argument("--fsdp", action="store_true")
    parser.add_argument("--activation-checkpointing", action="store_true")
    for name, default in TRAIN_DEFAULTS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    known, _ = parser.parse_known_args(entry[1:])
    return known


def entry_fit(partition: Partition, entry: list[str], nodes: int) -> EntryFit | None:
    """The memory of `entry` on `nodes` nodes of `partition`, or None when it is not a command this can judge (not
    jobs/train.py, a custom shape, flags that do not divide the devices: the entry point refuses those)."""
    if not entry or not entry[0].endswith("train.py"):
        return None
    try:
        flags = _flags(entry)
    except (argparse.ArgumentError, SystemExit):
        return None
    if flags.model not in PRESETS:
        return None
    devices = nodes * partition.devices_per_node
    split = flags.tp * flags.pp
    if split < 1 or devices % split or (devices // split) % flags.dp_replicate:
        return None
    dp = devices // split
    if not flags.fsdp:
        layout = Layout(nodes, "DDP", dp_shard=1, dp_replicate=dp, tp=flags.tp, pp=flags.pp)
    elif flags.dp_replicate > 1:
        layout = Layout(nodes, "HSDP", dp_shard=dp // flags.dp_replicate, dp_replicate=flags.dp_replicate,
                        tp=flags.tp, pp=flags.pp)  # fmt: skip
    else:
        layout = Layout(nodes, "FSDP", dp_shard=dp, dp_replicate=1, tp=flags.tp, pp=flags.pp)
    layout = Layout(**{**layout.__dict__, "micro_batch": flags.batch_size, "grad_accum": flags.grad_accum,
                       "activation_checkpointing": flags.activation_checkpointing,
                       "ac_every": flags.ac_every})  # fmt: skip
    shape = PRESETS[flags.model]
    device = partition.device_memory_gib
    return EntryFit(flags.model, layout, memory(shape, layout, flags.seq_len, device), device,
                    host_memory_gib(shape, layout, partition.devices_per_node),
                    partition.host_memory_gib or float("inf"), flags.seq_len)  # fmt: skip
