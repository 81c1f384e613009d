"""`slurm-eks advise`: the parallel layout, node count and job script for a model on a partition. Registered by
scripts/cli/main.py; the work is in scripts/advise/."""

from __future__ import annotations

import dataclasses
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from components.config.problems import ConfigError, plural
from components.config.stackfile import STACKS_DIR, load_stack
from jobs.training.presets import PRESETS
from scripts.advise import advisor
from scripts.advise.advisor import (
    DEFAULT_MFU,
    DEFAULT_SEQ_LEN,
    NODE_SEARCH_LIMIT,
    REGIMES,
    Advice,
    Candidate,
    global_batch_sequences,
)
from scripts.advise.hardware import partition_hardware
from scripts.advise.memory import (
    ADAMW_BYTES,
    FRAGMENTATION,
    GRADIENT_BYTES,
    HEAD_WIDTH_H,
    HEAD_WIDTH_V,
    HOST_RUNTIME_GIB,
    LAYER_GATHERED_H,
    LAYER_PER_HEAD,
    LAYER_WIDTH_F,
    LAYER_WIDTH_H,
    MASTER_WEIGHT_BYTES,
    RUNTIME_GIB,
)
from scripts.advise.models import AdviseError, requested_model
from scripts.advise.moe import MOE_PRESETS, MoeAdvice, advise_moe
from scripts.cli.bars import memory_bar
from scripts.cli.problems import CONFIG_ERROR_EXIT, err, fail_config


class AdviseFormat(StrEnum):
    text = "text"
    json = "json"


def advise(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    partition: Annotated[str, typer.Option("--partition", "-p", help="the partition to train on")],
    model: Annotated[str | None, typer.Option(
        "--model", help=f"preset of jobs/training/presets.py ({', '.join(PRESETS)}), or a mixture-of-experts "
                        f"preset trained through torchtitan ({', '.join(MOE_PRESETS)})")] = None,
    params: Annotated[float | None, typer.Option(
        help="custom model: its parameter count (e.g. 13e9), checked against the shape flags")] = None,
    dim: Annotated[int | None, typer.Option(min=1, help="custom model: width")] = None,
    layers: Annotated[int | None, typer.Option(min=1, help="custom model: transformer layers")] = None,
    heads: Annotated[int | None, typer.Option(min=1, help="custom model: query heads")] = None,
    kv_heads: Annotated[int | None, typer.Option(min=1, help="custom model: key/value heads (default --heads)")] = None,
    ffn_dim: Annotated[int | None, typer.Option(min=1, help="custom model: SwiGLU width (default Llama's)")] = None,
    vocab: Annotated[int | None, typer.Option(min=1, help="custom model: vocabulary (default 128256)")] = None,
    seq_len: Annotated[int | None, typer.Option(
        min=1, help=f"tokens per sequence (default {DEFAULT_SEQ_LEN}; a mixture-of-experts preset's config's)")] = None,
    global_batch: Annotated[int | None, typer.Option(min=1, help="sequences per optimizer step")] = None,
    global_batch_tokens: Annotated[int | None, typer.Option(
        min=1, help="tokens per optimizer step instead (default 4194304: 4M)")] = None,
    nodes: Annotated[int | None, typer.Option(
        "--nodes", "-N", min=1, help="this many nodes (default: the fewest without activation checkpointing, "
                                     "else the fewest with it)")] = None,
    mfu: Annotated[float, typer.Option(help="model FLOPs utilisation assumed for the estimate")] = DEFAULT_MFU,
    as_json: Annotated[bool, typer.Option("--json", help="the whole answer as JSON (as --format json)")] = False,
    format: Annotated[AdviseFormat, typer.Option(help="text for people, json for tools (docs/cli-json.md)")] = (
        AdviseFormat.text),
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
) -> None:
    """Which layout (DDP/FSDP/HSDP x TP x PP, micro-batch, accumulation, activation checkpointing) and how many
    nodes to train a model with on a partition, memory per device of each candidate, and the job render command."""
    as_json = as_json or format is AdviseFormat.json
    try:
        config, _ = load_stack(stack, stacks_dir)
    except ConfigError as exc:
        raise fail_config(exc) from None
    shape_flags = {"--params": params, "--dim": dim, "--layers": layers, "--heads": heads, "--kv-heads": kv_heads,
                   "--ffn-dim": ffn_dim, "--vocab": vocab}
    where = None if stacks_dir == STACKS_DIR else str(stacks_dir)
    try:
        hardware = partition_hardware(config, stack, partition)
        if model in MOE_PRESETS:
            if given := [flag for flag, value in shape_flags.items() if value is not None]:
                raise AdviseError(f"--model {model} is a preset with its own shape: drop {' '.join(given)}")
            preset = MOE_PRESETS[model]
            tokens = seq_len or preset.seq_len
            batch = global_batch_sequences(tokens, global_batch, global_batch_tokens)
            moe_advice = advise_moe(preset, hardware, tokens, batch, nodes=nodes, mfu=mfu, stacks_dir=where)
        else:
            chosen_model = requested_model(model, dim=dim, layers=layers, heads=heads, kv_heads=kv_heads,
                                           ffn_dim=ffn_dim, vocab=vocab, params=params)
            tokens = seq_len or DEFAULT_SEQ_LEN
            batch = global_batch_sequences(tokens, global_batch, global_batch_tokens)
            advice = advisor.advise(chosen_model, hardware, tokens, batch, nodes=nodes, mfu=mfu, stacks_dir=where)
    except AdviseError as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    if model in MOE_PRESETS:
        if as_json:
            typer.echo(json.dumps(moe_json(moe_advice), indent=2))
        else:
            _print_moe(moe_advice)
    elif as_json:
        typer.echo(json.dumps(advice_json(advice), indent=2))
    else:
        _print(advice)


def moe_json(advice: MoeAdvice) -> dict[str, Any]:
    """A mixture-of-experts answer: the preset, the layout, memory in GiB per GPU, the estimate, the command."""
    preset, shape = advice.preset, advice.preset.shape
    return {
        "model": {"name": preset.name, "torchtitan": {"module": preset.module, "config": preset.config,
                                                      "flavor": preset.flavor},
                  "params": shape.params, "active_params": shape.active_params, **dataclasses.asdict(shape),
                  "activation_checkpointing": preset.checkpointing},
        "partition": dataclasses.asdict(advice.partition),
        "seq_len": advice.seq_len,
        "global_batch": {"sequences": advice.global_batch, "tokens": advice.global_batch * advice.seq_len},
        "recommended": {"layout": dataclasses.asdict(advice.layout), "describe": advice.layout.describe(),
                        "memory_gib": {**dataclasses.asdict(advice.memory), "total": advice.memory.total},
                        "mfu_assumed": advice.mfu, "tokens_per_s": advice.tokens_per_s,
                        "checkpoint_gb": advice.checkpoint_gb, "step_seconds": advice.step_seconds,
                        "command": advice.command},
    }


def _print_moe(advice: MoeAdvice) -> None:
    out = Console(soft_wrap=True, highlight=False, markup=False)
    preset, shape, part, lay, m = advice.preset, advice.preset.shape, advice.partition, advice.layout, advice.memory
    out.print(f"{preset.name}: {shape.params / 1e9:.1f}B parameters, {shape.active_params / 1e9:.2f}B active a token "
              f"({shape.layers} layers, dim {shape.dim}, {shape.experts} experts, {shape.top_k} routed a token); "
              f"torchtitan --module {preset.module} --config {preset.config}")
    out.print(f"partition {part.name} of stack {part.stack}: {' or '.join(part.instance_types)}, "
              f"{part.devices_per_node} x {part.accelerator} GPUs of {part.device_memory_gib:g} GiB per node")
    ac = "full" if preset.checkpointing == "full" else "selective (counted as none: an upper bound)"
    out.print(f"recommended: {lay.describe()} on {plural(lay.nodes, 'node')} ({plural(lay.devices, 'GPU')}), "
              f"local batch {lay.micro_batch} x {lay.grad_accum} accumulation steps, activation checkpointing {ac}")
    out.print(f"memory per GPU: {memory_bar(m.total, part.device_memory_gib)}")
    out.print(f"memory per GPU: {m.total:.1f} GiB of {part.device_memory_gib:g} (weights {m.weights:.1f}, "
              f"gradients {m.gradients:.1f}, AdamW {m.optimizer:.1f}, activations {m.activations:.1f}, allowance "
              f"{m.reserve:.1f}); expert parallelism places the experts among the FSDP ranks' shards: it changes "
              "who holds an expert, not the bytes a GPU holds")
    out.print(f"estimate: {advice.tokens_per_s:,.0f} tokens/s at the assumed {advice.mfu:.0%} MFU of the active "
              f"parameters' FLOPs (a dense model's figure; torchtitan publishes none for MoE)")
    out.print(f"render it (a checkpoint is {advice.checkpoint_gb} GB, a step about {advice.step_seconds} s; the image "
              "must carry torchtitan 0.3.0: docs/jobs.md, torchtitan recipe):")
    out.print(f"  {advice.command}")


def advice_json(advice: Advice) -> dict[str, Any]:
    """Every figure of the answer; memory in GiB per device."""

    def candidate(c: Candidate) -> dict[str, Any]:
        return {"layout": dataclasses.asdict(c.layout), "describe": c.layout.describe(),
                "memory_gib": {**dataclasses.asdict(c.memory), "total": c.memory.total},
                "host_gib_per_node": c.host_gib, "fits": c.fits}

    return {
        "model": {"name": advice.model.name, "params": advice.model.params,
                  **dataclasses.asdict(advice.model.shape)},
        "partition": dataclasses.asdict(advice.partition),
        "seq_len": advice.seq_len,
        "global_batch": {"sequences": advice.global_batch, "tokens": advice.global_batch * advice.seq_len},
        "regime": advice.regime,
        "recommended": {
            **candidate(advice.chosen),
            "mfu_assumed": advice.mfu,
            "mfu_effective": advice.effective_mfu,
            "tokens_per_s": advice.tokens_per_s,
            "checkpoint_gb": advice.checkpoint_gb,
            "step_seconds": advice.step_seconds,
            "train_flags": list(advice.flags),
            "command": advice.command,
        },
        "fewer_nodes": candidate(advice.fewer_nodes) if advice.fewer_nodes else None,
        "nodes_without_checkpointing": advice.plain_nodes,
        "candidates": [{"plain": candidate(o.plain), "checkpointed": candidate(o.checkpointed)}
                       for o in advice.options],
        "notes": list(advice.notes),
    }


def _print(advice: Advice) -> None:
    out = Console(soft_wrap=True, highlight=False, markup=False)  # the command stays one line to copy
    model, part, chosen = advice.model, advice.partition, advice.chosen.layout
    shape, device = model.shape, part.device_word
    out.print(f"{model.name}: {model.params / 1e9:.1f}B parameters ({shape.n_layers} layers, dim {shape.dim}, "
              f"{shape.n_heads} heads / {shape.n_kv_heads} kv, ffn {shape.ffn_dim}, vocab {shape.vocab_size})")
    out.print(f"partition {part.name} of stack {part.stack}: {' or '.join(part.instance_types)}, "
              f"{part.devices_per_node} x {part.accelerator} {device}s of {part.device_memory_gib:g} GiB per node, "
              f"at most {plural(part.max_nodes, 'node')}")
    out.print(f"step: {advice.global_batch} sequences of {advice.seq_len} tokens "
              f"({advice.global_batch * advice.seq_len:,} tokens); {REGIMES[advice.regime]}")
    out.print(_table(advice))
    out.print(f"memory: weights {MASTER_WEIGHT_BYTES} + gradients {GRADIENT_BYTES} + AdamW {ADAMW_BYTES} bytes a "
              "parameter in fp32, divided by the FSDP shard, plus bf16 compute copies; activations of a layer "
              f"{LAYER_WIDTH_H}h + {LAYER_WIDTH_F}f + {LAYER_PER_HEAD}a bytes a token, all but {LAYER_GATHERED_H}h "
              "divided by TP, its input alone with AC (activation checkpointing), and the loss "
              f"{HEAD_WIDTH_H}h + {HEAD_WIDTH_V}V/TP (loss parallelism); allowance {RUNTIME_GIB:g} GiB + "
              f"{FRAGMENTATION:.0%}")
    out.print(f"host memory: {advice.chosen.host_gib:.0f} GiB per node of the {part.host_memory_gib:.0f} Slurm gives a "
              f"job there ({HOST_RUNTIME_GIB:g} GiB a rank, and each rank's checkpoint staged by dcp.async_save; the "
              "model is built on the meta device, so no rank holds more than its shards)")
    ac = "with activation checkpointing" if chosen.activation_checkpointing else "no activation checkpointing"
    out.print(f"recommended: {chosen.describe()} on {plural(chosen.nodes, 'node')} ({plural(chosen.devices, device)}), "
              f"micro-batch {chosen.micro_batch} x {chosen.grad_accum} accumulation steps per replica, {ac}")
    out.print(f"memory per {device}: {memory_bar(advice.chosen.memory.total, part.device_memory_gib)}")
    if advice.effective_mfu == advice.mfu:
        rate = f"the assumed {advice.mfu:.0%} MFU"
    else:
        rate = f"{advice.effective_mfu:.1%} MFU ({advice.mfu:.0%} assumed, less recomputation and pipeline bubble)"
    out.print(f"estimate: {advice.tokens_per_s:,.0f} tokens/s at {rate}, {part.peak_flops / 1e12:g} TFLOPS bf16 "
              f"peak per {device}")
    if advice.fewer_nodes:
        fewer = advice.fewer_nodes.layout
        out.print(f"fewer nodes: {fewer.describe()} on {plural(fewer.nodes, 'node')} with activation "
                  f"checkpointing (--nodes {fewer.nodes})")
    if chosen.activation_checkpointing:
        plain = advice.plain_nodes
        if plain is None:
            out.print(f"without activation checkpointing: no node count up to {NODE_SEARCH_LIMIT} fits")
        else:
            how = f"--nodes {plain}" if plain <= part.max_nodes else \
                f"partitions.{part.name}.maxNodes is {part.max_nodes}"
            out.print(f"without activation checkpointing: {plural(plain, 'node')} ({how})")
    for note in advice.notes:
        out.print(f"note: {note}")
    if advice.command:
        out.print(f"render it (a checkpoint is {advice.checkpoint_gb} GB, a step about {advice.step_seconds} s):")
        out.print(f"  {advice.command}")
    else:
        out.print(f"no render command; the layout in jobs/train.py's flags: {' '.join(advice.flags)}")


def _table(advice: Advice) -> Table:
    """One row per layout at the chosen node count: without activation checkpointing where that fits, else with."""
    part = advice.partition
    title = (f"candidate layouts on {plural(advice.chosen.layout.nodes, 'node')}, GiB per {part.device_word} of "
             f"{part.device_memory_gib:g} (total includes an allowance of {advice.chosen.memory.reserve:.1f})")
    # Narrow numbers that never wrap; a long layout folds onto a second line in an 80-column terminal.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), title=title,
                  title_justify="left")
    table.add_column("layout", overflow="fold")
    for column in ("AC", "mb x acc", "weights", "grads", "AdamW", "activ.", "total", "fits"):
        table.add_column(column, no_wrap=True, justify="left" if column in ("AC", "mb x acc", "fits") else "right")
    for option in advice.options:
        c = option.choice or option.checkpointed
        m, lay = c.memory, c.layout
        table.add_row(lay.describe(), "yes" if lay.activation_checkpointing else "no",
                      f"{lay.micro_batch} x {lay.grad_accum}",
                      *(f"{v:.1f}" for v in (m.weights, m.gradients, m.optimizer, m.activations, m.total)),
                      "chosen" if c == advice.chosen else "yes" if c.fits else "no")
    return table
