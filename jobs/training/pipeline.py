"""Pipeline parallelism: one stage of the model per pp rank, run by torch.distributed.pipelining's 1F1B.

The split follows torchtitan's `_pipeline_module_split` (pytorch/torchtitan
`torchtitan/distributed/pipeline_parallel.py`): each rank deletes the layers of the other stages from the
whole, already initialised model, so a stage's parameter names are the whole model's (DCP checkpoints and
`params_sha256` line up across layouts) and its weights are those every other layout starts from. Layers go
to stages in order, as evenly as possible, earlier stages taking the remainder; the first stage also holds
`tok_embeddings`, the last `norm` and `output`.

The schedule (torch/distributed/pipelining/schedules.py `Schedule1F1B`) runs the step's --grad-accum
micro-batches; the last stage computes each one's loss, the model's own mean cross-entropy (Transformer.cross_entropy,
vocabulary-sharded under tensor parallelism), and the schedule
divides the summed gradients by their count (`scale_grads`), as gradient accumulation divides each loss.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from inspect import signature

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.nn import Module

from jobs.training.model import Transformer


def stage_layers(n_layers: int, n_stages: int, stage: int) -> range:
    """The layer ids of `stage`: contiguous, the first `n_layers % n_stages` stages one more."""
    per, extra = divmod(n_layers, n_stages)
    start = stage * per + min(stage, extra)
    return range(start, start + per + (stage < extra))


def split_stage(model: Transformer, stage: int, n_stages: int) -> None:
    """Reduce the whole `model` to pipeline stage `stage` in place: names unchanged, other stages' modules gone."""
    keep = {str(i) for i in stage_layers(len(model.layers), n_stages, stage)}
    for key in [k for k in model.layers if k not in keep]:
        del model.layers[key]
    if stage > 0:
        model.tok_embeddings = None
    if stage < n_stages - 1:
        model.norm = None
        model.output = None




@dataclass(frozen=True)
class Pipeline:
    schedule: Schedule1F1B
    group: dist.ProcessGroup  # this rank's pp peers: one rank of each stage
    is_first: bool
    is_last: bool
    # what the schedule's step runs in: loss_parallel on a last stage under tensor parallelism (the schedule runs
    # the loss and the backward inside step)
    loss_context: Callable[[], AbstractContextManager[object]] = nullcontext

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Forward and backward of the micro-batches stacked in `inputs` and `targets` (the same on every stage
        of a replica). Returns their mean loss on the last stage, 0 on the others."""
        losses: list[torch.Tensor] = []
        # Newer torch merges the last stage's outputs (the logits) unless told not to; torch 2.9 has no such
        # argument and would pass it to the model.
        keep = {"return_outputs": False} if "return_outputs" in signature(self.schedule.step).parameters else {}
        # Contiguous: torch 2.9's stage checks each micro-batch's strides against the first one's, and a batch
        # sliced from a longer one (tokens[:, :-1]) is not.
        with self.loss_context():
            self.schedule.step(
                *((inputs.contiguous(),) if self.is_first else ()),
                target=targets.contiguous() if self.is_last else None,
                losses=losses if self.is_last else None,
                **keep,
            )
        if not self.is_last:
            return torch.zeros((), device=inputs.device)
        return torch.stack(losses).mean().to(inputs.device)  # FSDP2 + PP can leave the loss on the CPU (torchtitan)


class _Stage(PipelineStage):
    """torch's PipelineStage, with the first exchange between neighbours in one dtype.

    Before its first step a stage sends its index to each neighbour and receives theirs. torch 2.9 (the GPU
    image's, public.ecr.aws/deep-learning-containers/pytorch-training:2.9.0-...) sends an int64 into a float32
    buffer: gloo aborts ("8 vs 4. Received data size doesn't match expected size", measured), and NCCL across
    nodes is undefined behaviour (pytorch/pytorch#165143, fixed by #165539, in 2.13 both are float32)."""

    def _get_init_p2p_neighbors_ops(self) -> list[dist.P2POp]:
        ops = super()._get_init_p2p_neighbors_ops()
        for op in ops:
            if op.tensor.dtype != torch.float32:
                op.tensor = op.tensor.to(torch.float32)
        return ops


def build_pipeline(stage_module: Module, pp_mesh: DeviceMesh, device: torch.device, n_microbatches: int,
                   loss_context: Callable[[], AbstractContextManager[object]] = nullcontext) -> Pipeline:
    """The 1F1B schedule of this rank's stage (its index: the rank's pp coordinate). Shapes of what passes
    between stages are inferred from the first micro-batch."""
    stage_index, n_stages, group = pp_mesh.get_local_rank(), pp_mesh.size(), pp_mesh.get_group()
    stage = _Stage(stage_module, stage_index, n_stages, device, group=group)
    schedule = Schedule1F1B(stage, n_microbatches=n_microbatches, loss_fn=Transformer.cross_entropy)
    return Pipeline(schedule, group, is_first=stage_index == 0, is_last=stage_index == n_stages - 1,
                    loss_context=loss_context)
