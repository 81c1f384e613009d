"""DeepSpeed ZeRO-3 configs for a partition's GPUs, for `jobs/recipes/hf_finetune.py --deepspeed FILE`.

The brief's config (bf16, ZeRO stage 3, optional CPU offload, overlapped communication, contiguous
gradients, gathered 16-bit weights on save) with the sizes left "auto": the Hugging Face integration
(transformers/integrations/deepspeed.py, HfTrainerDeepSpeedConfig) fills the batch sizes and gradient
clipping from the Trainer's flags and the bucket sizes from the model's hidden size, so one file serves
every model and batch size. DeepSpeed's own parser takes the file only after that filling.

Key names as DeepSpeed 0.19.8 reads them:

- `bf16.enabled`: runtime/constants.py BFLOAT16 = "bf16", BFLOAT16_ENABLED = "enabled" (parsed by
  runtime/precision_config.py DeepSpeedBF16Config).
- `zero_optimization`: runtime/zero/config.py ZERO_OPTIMIZATION; its DeepSpeedZeroConfig fields `stage`,
  `overlap_comm`, `contiguous_gradients`, `reduce_bucket_size`, `offload_optimizer`, `offload_param`, and the
  aliases `stage3_prefetch_bucket_size`, `stage3_param_persistence_threshold`,
  `stage3_gather_16bit_weights_on_model_save`.
- `offload_optimizer` / `offload_param`: runtime/zero/offload_config.py DeepSpeedZeroOffloadOptimizerConfig and
  DeepSpeedZeroOffloadParamConfig, fields `device` (OffloadDeviceEnum: none, cpu, nvme) and `pin_memory`.
- `gradient_clipping`, `train_batch_size`, `train_micro_batch_size_per_gpu`, `gradient_accumulation_steps`,
  `optimizer` with `type` and `params`: runtime/constants.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from components import catalog
from components.config.cluster import ClusterConfig
from jobs.render import RenderError, target_for_partition

# GPUs with bf16 tensor cores (Ampere and newer) among the catalog's NVIDIA models.
BF16_GPUS = frozenset({"A10G", "A100", "H100", "H200"})
AUTO = "auto"  # filled by the Hugging Face integration before DeepSpeed sees the config


@dataclass(frozen=True)
class PartitionConfig:
    config: dict[str, object]
    summary: str  # one line for the CLI: what the config is for


def zero3_config(offload: bool) -> dict[str, object]:
    """The ZeRO-3 config; `offload` moves optimizer state and parameters to pinned host memory."""
    zero: dict[str, object] = {
        "stage": 3,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": AUTO,
        "stage3_prefetch_bucket_size": AUTO,
        "stage3_param_persistence_threshold": AUTO,
        # save_model writes whole 16-bit weights (gathered from every rank), not only ZeRO shards
        "stage3_gather_16bit_weights_on_model_save": True,
    }
    config: dict[str, object] = {"bf16": {"enabled": True}, "zero_optimization": zero}
    if offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
        # DeepSpeed refuses the Trainer's own optimizer under ZeRO-Offload (engine.py,
        # zero_force_ds_cpu_optimizer); naming AdamW here makes it run its CPU Adam on the offloaded state.
        # The Trainer's warmup + cosine schedule still drives it.
        config["optimizer"] = {
            "type": "AdamW",
            "params": {"lr": AUTO, "betas": AUTO, "eps": AUTO, "weight_decay": AUTO},
        }
    config.update({
        "gradient_clipping": AUTO,
        "train_micro_batch_size_per_gpu": AUTO,
        "gradient_accumulation_steps": AUTO,
        "train_batch_size": AUTO,
    })
    return config


def for_partition(config: ClusterConfig, stack: str, partition: str, offload: bool) -> PartitionConfig:
    """The ZeRO-3 config for the partition's GPUs; refuses partitions DeepSpeed cannot run on as configured."""
    target = target_for_partition(config, stack, partition, container=False)  # unknown names: "did you mean"
    types = [catalog.lookup(name) for name in config.partitions[partition].instance_types]
    if any(it.accelerator != "nvidia" for it in types):
        raise RenderError(
            f"partition {partition} has no NVIDIA GPUs ({target.description}): DeepSpeed ZeRO runs on CUDA; "
            "on Trainium train with jobs/train.py, which the Neuron job script runs on the XLA device"
        )
    no_bf16 = sorted({it.accelerator_model for it in types} - BF16_GPUS)
    if no_bf16:
        raise RenderError(
            f"partition {partition}: {', '.join(no_bf16)} is not known to have bf16 (Ampere or newer); "
            "add it to BF16_GPUS in jobs/recipes/deepspeed_config.py if it has"
        )
    summary = f"ZeRO-3, bf16, for {target.description}"
    if offload:
        host_gib = min(it.memory_gib // it.accelerators for it in types)
        summary += f"; optimizer state and parameters offloaded to pinned host memory ({host_gib} GiB per GPU)"
    return PartitionConfig(zero3_config(offload), summary)
