"""Under torchrun (4 CPU workers, gloo): every layout of LAYOUTS starts from the unsharded model's weights and
computes its loss and gradient norm for one global batch. Per layout, rank 0 prints one JSON line: whether
params_sha256 of the parallelized model equals the unsharded model's, and both losses and gradient norms
(tests/jobs/test_parallelism.py checks them). Every layout runs in this one process group: one torchrun start."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from jobs.training.config import ModelConfig
from jobs.training.distributed import init_distributed
from jobs.training.mesh import build_mesh, dp_rank, first_of_stage, parallel_dims
from jobs.training.metrics import params_sha256
from jobs.training.model import Transformer
from jobs.training.parallelize import clip_grad_norm_, parallelize
from jobs.training.presets import ModelShape

SHAPE = ModelShape(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=64)
TIED = ModelShape(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=64, tie_embeddings=True)
# Name (the layout's describe(), then what else differs): shape, flags ("ac": activation checkpointing).
LAYOUTS: dict[str, tuple[ModelShape, dict[str, int | bool]]] = {
    "ddp dp_replicate=4": (SHAPE, {}),
    "fsdp2 dp_shard=4": (SHAPE, {"fsdp": True}),
    "fsdp2 dp_replicate=2 dp_shard=2": (SHAPE, {"fsdp": True, "dp_replicate": 2}),
    "fsdp2 dp_shard=2 tp=2": (SHAPE, {"fsdp": True, "tp": 2}),
    "fsdp2 dp_shard=2 tp=2, tied embeddings": (TIED, {"fsdp": True, "tp": 2}),
    "fsdp2 pp=2 dp_shard=2": (SHAPE, {"fsdp": True, "pp": 2}),
    "fsdp2 pp=2 dp_replicate=2": (SHAPE, {"fsdp": True, "pp": 2, "dp_replicate": 2}),
    "fsdp2 pp=2 tp=2": (SHAPE, {"fsdp": True, "pp": 2, "tp": 2}),
    "fsdp2 pp=2 tp=2, activation checkpointing": (SHAPE, {"fsdp": True, "pp": 2, "tp": 2, "ac": True}),
}
SEQ_LEN, GLOBAL_BATCH, MICRO_BATCHES = 16, 8, 2


def main() -> None:
    env = init_distributed("cpu")
    batch = torch.randint(0, SHAPE.vocab_size, (GLOBAL_BATCH, SEQ_LEN + 1), generator=torch.Generator().manual_seed(1))
    for name, (shape, flags) in LAYOUTS.items():
        cfg = ModelConfig(shape, SEQ_LEN, 0.0)
        torch.manual_seed(0)
        whole = Transformer(cfg)
        whole(batch[:, :-1], batch[:, 1:]).backward()  # the mean over every sequence: what the layouts average to
        expected_norm = torch.nn.utils.get_total_norm([p.grad for p in whole.parameters()])
        expected_digest = params_sha256(whole, env.cpu_group, hashes=env.is_main)
        expected_loss = whole(batch[:, :-1], batch[:, 1:]).item()

        args = {"tp": 1, "pp": 1, "dp_replicate": 1, "fsdp": False, **flags}
        ac = bool(args.pop("ac", False))
        dims = parallel_dims(env.world_size, env.world_size, **args)  # type: ignore[arg-type]
        mesh = build_mesh(dims, "cpu")
        with torch.device("meta"):  # as jobs/train.py builds it: laid out, then each rank makes its shards
            deferred = Transformer(cfg)
        par = parallelize(deferred, env, dims, mesh, activation_checkpointing=ac, compile_blocks=False,
                          n_microbatches=MICRO_BATCHES)  # fmt: skip
        digest = params_sha256(par.model, env.cpu_group, hashes=first_of_stage(mesh))
        widths: list[int] = []  # the vocabulary width of the logits this rank holds (loss parallelism: V / tp)
        output = getattr(getattr(par.model, "module", par.model), "output", None)
        if output is not None:
            output.register_forward_hook(lambda _m, _i, out, seen=widths: seen.append(
                (out.to_local() if isinstance(out, DTensor) else out).shape[-1]))
        rows = GLOBAL_BATCH // dims.dp
        mine = batch[dp_rank(mesh, dims) * rows :][:rows]
        if par.pipeline is not None:
            loss = par.pipeline.step(mine[:, :-1], mine[:, 1:])
        else:
            loss = torch.zeros(())
            for micro in mine.chunk(MICRO_BATCHES):
                with par.loss_context():
                    part = par.model(micro[:, :-1], micro[:, 1:]) / MICRO_BATCHES
                    part.backward()
                loss += part.detach()
        dist.all_reduce(loss)  # the last stages' losses (0 elsewhere), each tensor-parallel rank's the same
        width = torch.tensor(max(widths, default=0))
        dist.all_reduce(width, op=dist.ReduceOp.MAX)  # under PP only the last stage has logits
        norm = clip_grad_norm_(par.model.parameters(), math.inf, par.pipeline.group if par.pipeline else None)
        if env.is_main:
            print(json.dumps({
                "layout": name, "described": dims.describe(), "same_digest": digest == expected_digest,
                "loss": loss.item() / (env.world_size / dims.pp), "expected_loss": expected_loss,
                "grad_norm": norm.item(), "expected_grad_norm": expected_norm.item(), "logits_width": width.item(),
            }), flush=True)  # fmt: skip
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
