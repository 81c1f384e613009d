"""The layout to train a model with on a partition: the brief's decision matrix, searched node count by node count.

The product brief's matrix (../shared/seed, "Decision matrix for parallelism selection"): below 10B
parameters, data parallelism only; 10B-100B, data and tensor parallelism, tensor parallelism inside a node;
above 100B, 3-D: data, tensor and pipeline parallelism, the pipeline across nodes. Within what it allows,
the answer is the layout that needs no activation checkpointing (recomputing the forward costs a third more
FLOPs) on the fewest nodes, else the one that needs it on the fewest nodes; at one node count, replicas
before sharding (DDP, then HSDP, then FSDP) and the smallest tensor and pipeline degrees (model parallelism
just large enough to fit, data parallelism for the rest: Narayanan et al. 2021, "Efficient Large-Scale
Language Model Training on GPU Clusters Using Megatron-LM", section 3), with the largest micro-batch that fits.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Literal

from components.config.problems import plural
from scripts.advise.hardware import Partition
from scripts.advise.memory import CHECKPOINT_BYTES, Layout, Memory, host_memory_gib, memory
from scripts.advise.models import AdviseError, Model

# Llama 3 pre-trained on 8,192-token sequences after its first 252M tokens, in batches from 4M tokens up ("The
# Llama 3 Herd of Models", 2024, section 3.4.1): the defaults.
DEFAULT_SEQ_LEN = 8192
DEFAULT_GLOBAL_BATCH_TOKENS = 4 * 2**20
# Model FLOPs utilisation assumed for the estimate: what torchtitan, the reference this entry point follows,
# measured without torch.compile or Float8 (the entry point's defaults): Llama 3.1 8B with FSDP on 8 H100s,
# 5,762 tokens/s a GPU (pytorch/torchtitan docs/performance.md, Table 1), 33.7% of the H100's 989 TFLOPS at
# 6 x 8.03B + attention = 57.9 GFLOP a token (jobs/training/presets.py). Meta's own stack reached 38-43% for
# Llama 3 405B ("The Llama 3 Herd of Models", Table 4). An assumption for every accelerator; --mfu changes it.
DEFAULT_MFU = 0.34
# Full activation checkpointing recomputes the forward pass (2 of the 6 FLOPs a parameter costs per token):
# the same hardware utilisation trains 6/8 as many tokens (PaLM, Chowdhery et al. 2022, appendix B: MFU
# against hardware FLOPs utilisation).
RECOMPUTE_EFFICIENCY = 6 / 8
# The decision matrix's bounds, in parameters.
DATA_PARALLEL_BELOW = 10e9
TENSOR_PARALLEL_UP_TO = 100e9
# How far past a partition's maxNodes to look for the node count a model would need (a search bound, not a
# hardware fact: 1024 nodes of 8 GPUs).
NODE_SEARCH_LIMIT = 1024

Regime = Literal["data", "data+tensor", "3-D"]
REGIMES: dict[Regime, str] = {
    "data": "below 10B parameters: data parallelism only",
    "data+tensor": "10B-100B parameters: data parallelism x tensor parallelism inside a node",
    "3-D": "above 100B parameters: data x tensor (inside a node) x pipeline (across nodes) parallelism",
}


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    memory: Memory
    device_gib: float
    host_gib: float = 0.0  # what one node's ranks need of host memory (memory.host_memory_gib)
    node_host_gib: float = math.inf  # what Slurm lets a job use on one node

    @property
    def fits(self) -> bool:
        return self.memory.total <= self.device_gib and self.host_gib <= self.node_host_gib


@dataclass(frozen=True)
class Option:
    """One way to split the model over a node count, without and with activation checkpointing, each at the
    largest micro-batch that fits (micro-batch 1 when none does)."""

    plain: Candidate
    checkpointed: Candidate

    @property
    def choice(self) -> Candidate | None:
        return self.plain if self.plain.fits else self.checkpointed if self.checkpointed.fits else None


@dataclass(frozen=True)
class Advice:
    model: Model
    partition: Partition
    seq_len: int
    global_batch: int  # sequences per optimizer step
    regime: Regime
    options: tuple[Option, ...]  # at the chosen node count, in order of preference
    chosen: Candidate
    fewer_nodes: Candidate | None  # the fewest nodes it fits on, with checkpointing, when that is fewer than chosen's
    plain_nodes: int | None  # when chosen needs checkpointing: the fewest nodes without it (None: none)
    mfu: float  # assumed, without recomputation or a pipeline bubble
    effective_mfu: float  # with them
    tokens_per_s: float
    checkpoint_gb: int
    step_seconds: int  # one optimizer step at tokens_per_s, rounded up (job render --step-seconds)
    flags: tuple[str, ...]  # jobs/train.py's
    command: str | None  # None where the entry point cannot run the layout
    notes: tuple[str, ...]


def regime_for(params: int) -> Regime:
    if params < DATA_PARALLEL_BELOW:
        return "data"
    return "data+tensor" if params <= TENSOR_PARALLEL_UP_TO else "3-D"


def global_batch_sequences(seq_len: int, sequences: int | None, tokens: int | None) -> int:
    """The global batch in sequences, from sequences or tokens (default: DEFAULT_GLOBAL_BATCH_TOKENS)."""
    if sequences is not None and tokens is not None:
        raise AdviseError("give the global batch in sequences or in tokens, not both")
    if sequences is not None:
        return sequences
    tokens = DEFAULT_GLOBAL_BATCH_TOKENS if tokens is None else tokens
    if tokens < seq_len or tokens % seq_len:
        raise AdviseError(f"a global batch of {tokens} tokens is not a whole number of {seq_len}-token sequences")
    return tokens // seq_len


def advise(model: Model, partition: Partition, seq_len: int = DEFAULT_SEQ_LEN,
           global_batch: int = DEFAULT_GLOBAL_BATCH_TOKENS // DEFAULT_SEQ_LEN, nodes: int | None = None,
           mfu: float = DEFAULT_MFU, stacks_dir: str | None = None) -> Advice:
    """The recommended layout, node count and job script; `nodes` fixes the node count, `stacks_dir` goes
    into the render command when the stack is not in stacks/."""
    if seq_len < 1 or global_batch < 1:
        raise AdviseError(f"sequence length {seq_len} and global batch {global_batch} must be at least 1")
    if not 0 < mfu <= 1:
        raise AdviseError(f"--mfu {mfu:g} is not a fraction of the peak; give e.g. 0.4")
    if nodes is not None and not 1 <= nodes <= partition.max_nodes:
        raise AdviseError(f"--nodes {nodes} is outside partition {partition.name}'s 1 to {partition.max_nodes} "
                          f"(partitions.{partition.name}.maxNodes = {partition.max_nodes} in stack {partition.stack})")
    try:
        return _fit(model, partition, seq_len, global_batch, nodes, mfu, stacks_dir)
    except AdviseError as error:
        shorter = _shorter_that_fits(model, partition, seq_len, global_batch, nodes, mfu, stacks_dir)
        if shorter is not None:  # the error still ends with a command that runs
            raise AdviseError(f"{error}. At --seq-len {shorter.seq_len} (the same tokens a step) it fits on "
                              f"{plural(shorter.chosen.layout.nodes, 'node')} as {shorter.chosen.layout.describe()}"
                              f": {shorter.command}") from None  # fmt: skip
        if partition.native_alternative is not None:
            native = _on_native(model, partition.native_alternative, seq_len, global_batch, mfu, stacks_dir)
            raise AdviseError(f"{error}. {native}") from None
        raise


def _fit(model: Model, partition: Partition, seq_len: int, global_batch: int, nodes: int | None, mfu: float,
         stacks_dir: str | None) -> Advice:
    """The search itself: the advice, or the error that says why nothing fits."""
    search = _Search(model, partition, regime_for(model.params), seq_len, global_batch)
    counts = [nodes] if nodes is not None else list(range(1, partition.max_nodes + 1))
    plain: tuple[Candidate, list[Option]] | None = None
    checkpointed: tuple[Candidate, list[Option]] | None = None  # on the fewest nodes
    for n in counts:
        options = list(search.options(n))
        fitting = next((o.plain for o in options if o.plain.fits), None)
        if fitting is not None:
            plain = (fitting, options)
            break
        fitting = next((o.checkpointed for o in options if o.checkpointed.fits), None)
        if checkpointed is None and fitting is not None:
            checkpointed = (fitting, options)
    found = plain or checkpointed
    if found is None:
        raise search.does_not_fit(counts)
    chosen, options = found
    fewer = checkpointed[0] if plain is not None and checkpointed is not None else None
    plain_nodes = None if plain is not None else search.fewest_nodes(checkpointing=False, skip=counts)
    return _advice(search, chosen, options, fewer, plain_nodes, mfu, stacks_dir)


# The shortest sequence a failed request is retried at, halving (a search bound: shorter sequences than this are
# not what a language model is trained on).
SHORTEST_RETRY_SEQ_LEN = 512


def _shorter_that_fits(model: Model, partition: Partition, seq_len: int, global_batch: int, nodes: int | None,
                       mfu: float, stacks_dir: str | None) -> Advice | None:
    """The advice at the longest power-of-two fraction of `seq_len` that fits, with the same tokens a step."""
    shorter = seq_len // 2
    while shorter >= SHORTEST_RETRY_SEQ_LEN and seq_len % shorter == 0:
        try:
            return _fit(model, partition, shorter, global_batch * (seq_len // shorter), nodes, mfu, stacks_dir)
        except AdviseError:
            shorter //= 2
    return None


def _on_native(model: Model, native: Partition, seq_len: int, global_batch: int, mfu: float,
               stacks_dir: str | None) -> str:
    """What a trn2 partition with TorchNeuron would run: the option that makes a render command possible."""
    name, types = native.name, "/".join(native.instance_types)
    add = (f"add a partition {name} (instanceTypes [{types}], maxNodes {native.max_nodes}, image: the TorchNeuron "
           f"training image) to stack {native.stack}")
    try:
        advice = advise(model, native, seq_len, global_batch, None, mfu, stacks_dir)
    except AdviseError:
        return f"Nor does it fit {types} with TorchNeuron at up to {plural(native.max_nodes, 'node')}"
    return (f"With TorchNeuron on {types} ({native.devices_per_node} NeuronCores of {native.device_memory_gib:g} GiB "
            f"a node) it fits on {plural(advice.chosen.layout.nodes, 'node')} as {advice.chosen.layout.describe()}: "
            f"{add}, then {advice.command}")


def _advice(search: _Search, chosen: Candidate, options: list[Option], fewer: Candidate | None,
            plain_nodes: int | None, mfu: float, stacks_dir: str | None) -> Advice:
    model, partition, layout = search.model, search.partition, chosen.layout
    bubble = layout.grad_accum / (layout.grad_accum + layout.pp - 1)  # 1F1B's (p - 1) / m idle (Narayanan 2021)
    effective = mfu * (RECOMPUTE_EFFICIENCY if layout.activation_checkpointing else 1) * bubble
    tokens_per_s = effective * partition.peak_flops * layout.devices / model.shape.flops_per_token(search.seq_len)
    checkpoint_gb = math.ceil(model.params * CHECKPOINT_BYTES / 1e9)
    # One optimizer step at the estimate, rounded up: the signal lead covers the wait for the ranks' next stop
    # check, which is a step once steps take longer than 10 s (jobs/training/cadence.py).
    step_seconds = math.ceil(search.global_batch * search.seq_len / tokens_per_s)
    flags = entry_flags(model, layout, search.seq_len)
    notes: list[str] = []
    command: str | None = render_command(partition, layout, flags, checkpoint_gb, stacks_dir, step_seconds)
    if partition.data_parallel_only:
        notes.append(
            "this partition's chips (trn1) train through the legacy torch-xla path, where jobs/train.py replicates the "
            "whole model on every NeuronCore (jobs/training/xla.py), so only data-parallel layouts are considered; "
            "TorchNeuron on trn2/trn3 runs the FSDP and tensor-parallel layouts (docs/trainium.md)"
        )
    if partition.neuron:
        notes.append("the memory figures are PyTorch's accounting; the Neuron compiler plans device memory itself")
    return Advice(model, partition, search.seq_len, search.global_batch, search.regime, tuple(options), chosen,
                  fewer, plain_nodes, mfu, effective, tokens_per_s, checkpoint_gb, step_seconds, tuple(flags), command,
                  tuple(notes))


@dataclass(frozen=True)
class _Search:
    """The layouts of one request, node count by node count."""

    model: Model
    partition: Partition
    regime: Regime
    seq_len: int
    global_batch: int

    def structures(self, nodes: int) -> Iterator[tuple[Layout, int]]:
        """Every split the matrix allows on `nodes` nodes, in order of preference, with the sequences each
        data-parallel replica takes a step; splits the global batch does not divide evenly are left out."""
        shape, per_node = self.model.shape, self.partition.devices_per_node
        if self.partition.data_parallel_only:  # the legacy torch-xla path: replicas only
            dp = nodes * per_node
            per_replica, uneven = divmod(self.global_batch, dp)
            if not uneven:
                yield Layout(nodes, "DDP", dp_shard=1, dp_replicate=dp), per_replica
            return
        tps = [1] if self.regime == "data" else [
            t for t in range(2, per_node + 1)
            if per_node % t == 0 and shape.n_heads % t == 0 and shape.n_kv_heads % t == 0]  # whole heads per rank
        pps = [1] if self.regime != "3-D" else [
            p for p in range(2, nodes + 1) if nodes % p == 0 and p <= shape.n_layers]
        for tp in tps:
            for pp in pps:
                dp = nodes * per_node // (tp * pp)
                per_replica, uneven = divmod(self.global_batch, dp)
                if uneven or per_replica < pp:  # a pipeline needs a micro-batch per stage to fill
                    continue
                local = per_node // tp  # data-parallel ranks of one stage inside a node: a stage spans whole nodes
                if tp == pp == 1:  # DDP composes with neither (torchtitan refuses it)
                    yield Layout(nodes, "DDP", dp_shard=1, dp_replicate=dp), per_replica
                if 1 < local < dp:
                    yield Layout(nodes, "HSDP", dp_shard=local, dp_replicate=dp // local, tp=tp, pp=pp), per_replica
                yield Layout(nodes, "FSDP", dp_shard=dp, dp_replicate=1, tp=tp, pp=pp), per_replica

    def options(self, nodes: int) -> Iterator[Option]:
        for structure, per_replica in self.structures(nodes):
            yield Option(*(self.fitted(structure, per_replica, ac) for ac in (False, True)))

    def fitted(self, structure: Layout, per_replica: int, checkpointing: bool) -> Candidate:
        """The largest micro-batch that fits (micro-batch 1 if none does). A pipeline keeps micro-batch 1, so
        that a step has the most micro-batches and the smallest bubble."""
        sizes = [1] if structure.pp > 1 else [b for b in range(per_replica, 0, -1) if per_replica % b == 0]
        for b in sizes:
            candidate = self.candidate(structure, b, per_replica // b, checkpointing)
            if candidate.fits:
                break
        return candidate

    def candidate(self, structure: Layout, micro_batch: int, grad_accum: int, checkpointing: bool) -> Candidate:
        layout = replace(structure, micro_batch=micro_batch, grad_accum=grad_accum,
                         activation_checkpointing=checkpointing)
        device, per_node = self.partition.device_memory_gib, self.partition.devices_per_node
        host = host_memory_gib(self.model.shape, layout, per_node)
        return Candidate(layout, memory(self.model.shape, layout, self.seq_len, device), device, host,
                         self.partition.host_memory_gib or math.inf)

    def smallest(self, nodes: int, checkpointing: bool) -> Iterator[Candidate]:
        """Each split on `nodes` nodes at micro-batch 1, the least it can need."""
        for structure, per_replica in self.structures(nodes):
            yield self.candidate(structure, 1, per_replica, checkpointing)

    def fewest_nodes(self, checkpointing: bool, skip: list[int]) -> int | None:
        """The fewest nodes, up to NODE_SEARCH_LIMIT and other than `skip` (searched already), that fit."""
        return next((n for n in range(1, NODE_SEARCH_LIMIT + 1) if n not in skip
                     and any(c.fits for c in self.smallest(n, checkpointing))), None)

    def does_not_fit(self, counts: list[int]) -> AdviseError:
        model, partition = self.model, self.partition
        what = f"{model.name} ({model.params / 1e9:.1f}B parameters, {REGIMES[self.regime]})"
        where = (f"partition {partition.name} of stack {partition.stack} ({'/'.join(partition.instance_types)}: "
                 f"{partition.devices_per_node} x {partition.device_memory_gib:g} GiB {partition.accelerator} "
                 "per node)")
        on = plural(counts[0], "node") if len(counts) == 1 else f"up to {plural(counts[-1], 'node')}"
        tried = [c for n in counts for c in self.smallest(n, checkpointing=True)]
        if not tried:
            return AdviseError(f"{what} on {where}: no layout on {on} divides the global batch of "
                               f"{self.global_batch} sequences evenly over its data-parallel replicas; give a "
                               "global batch that a power of two divides")
        lean = min(tried, key=lambda c: c.memory.total)
        m = lean.memory
        at = (f"the leanest layout, {lean.layout.describe()} on {plural(lean.layout.nodes, 'node')} with "
              f"activation checkpointing and micro-batch 1, needs {m.total:.1f} GiB per {partition.device_word} "
              f"of {partition.device_memory_gib:g} (model state {m.weights + m.gradients + m.optimizer:.1f}, "
              f"activations {m.activations:.1f}, allowance {m.reserve:.1f}), and {lean.host_gib:.0f} GiB of host "
              f"memory per node of {partition.host_memory_gib:.0f}")
        needed = self.fewest_nodes(checkpointing=True, skip=counts)
        if partition.data_parallel_only:
            state = m.weights + m.gradients + m.optimizer
            fix = (f"every replica holds the whole model ({state:.1f} GiB of state) and the activations of a "
                   "micro-batch, and more nodes only add replicas: on trn1 jobs/train.py trains through the legacy "
                   "torch-xla path, data parallel only; a trn2 partition (TorchNeuron) shards the model with FSDP and "
                   "tensor parallelism")
        elif needed is None:
            fix = (f"no node count up to {NODE_SEARCH_LIMIT} is enough: more nodes shard the model state, not the "
                   f"{m.activations:.1f} GiB of activations of one micro-batch; shorten --seq-len or use a "
                   "partition with more memory per device")
            if self.regime == "data":
                fix += " (tensor parallelism would split them; the matrix keeps it for 10B parameters and more)"
        elif needed <= partition.max_nodes:
            fix = f"it fits on {plural(needed, 'node')}: --nodes {needed}"
        else:
            fix = (f"it fits on {plural(needed, 'node')}: raise partitions.{partition.name}.maxNodes "
                   f"({partition.max_nodes}) to {needed} or more, or use a partition with more memory per device")
        return AdviseError(f"{what} does not fit on {on} of {where}: {at}; {fix}")


def entry_flags(model: Model, layout: Layout, seq_len: int) -> list[str]:
    """jobs/train.py's flags for the layout: the model, the batch, and the parallelism."""
    shape = model.shape
    if model.preset:
        flags = ["--model", model.name]
    else:
        flags = ["--d-model", str(shape.dim), "--n-layers", str(shape.n_layers), "--n-heads", str(shape.n_heads),
                 "--n-kv-heads", str(shape.n_kv_heads), "--ffn-dim", str(shape.ffn_dim),
                 "--vocab-size", str(shape.vocab_size)]
    flags += ["--seq-len", str(seq_len), "--batch-size", str(layout.micro_batch),
              "--grad-accum", str(layout.grad_accum)]
    flags += ["--fsdp"] if layout.data != "DDP" else []
    flags += ["--dp-replicate", str(layout.dp_replicate)] if layout.data == "HSDP" else []
    flags += ["--tp", str(layout.tp)] if layout.tp > 1 else []
    flags += ["--pp", str(layout.pp)] if layout.pp > 1 else []
    flags += ["--activation-checkpointing"] if layout.activation_checkpointing else []
    return flags


def render_command(partition: Partition, layout: Layout, flags: list[str], checkpoint_gb: int,
                   stacks_dir: str | None, step_seconds: int | None = None) -> str:
    """`slurm-eks job render` for the layout; --checkpoint-gb and --step-seconds size the stop signal's lead to
    the wait for the ranks' stop agreement and the checkpoint's write."""
    words = ["slurm-eks", "job", "render", "--stack", partition.stack, "--partition", partition.name,
             "--nodes", str(layout.nodes), "--checkpoint-gb", str(checkpoint_gb)]
    words += ["--step-seconds", str(step_seconds)] if step_seconds is not None else []
    words += ["--stacks-dir", stacks_dir] if stacks_dir else []
    return shlex.join([*words, "--", "jobs/train.py", *flags])
