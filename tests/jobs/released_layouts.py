"""Under torchrun (4 CPU ranks, gloo): released weights read into the model laid out as TP 2 x FSDP 2 (and as
FSDP 4), then the loss of one batch; tests/jobs/test_released.py compares it with transformers' on the same
weights. Prints one JSON line per layout on rank 0."""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from jobs.training.config import ModelConfig
from jobs.training.distributed import init_distributed
from jobs.training.mesh import build_mesh, parallel_dims
from jobs.training.model import Transformer
from jobs.training.parallelize import parallelize
from jobs.training.released import ReleasedWeights, read_release

LAYOUTS = {"fsdp2 dp_shard=2 tp=2": {"tp": 2}, "fsdp2 dp_shard=4": {}}


def main(directory: Path, seq: int) -> None:
    env = init_distributed("cpu")
    release = read_release(directory)
    batch = torch.randint(0, release.shape.vocab_size, (2, seq + 1), generator=torch.Generator().manual_seed(3))
    for name, flags in LAYOUTS.items():
        dims = parallel_dims(env.world_size, env.world_size, pp=1, dp_replicate=1, fsdp=True, **{"tp": 1, **flags})
        with torch.device("meta"):
            model = Transformer(ModelConfig(release.shape, seq, 0.0))
        weights = ReleasedWeights(release)
        par = parallelize(model, env, dims, build_mesh(dims, "cpu"), activation_checkpointing=False,
                          compile_blocks=False, n_microbatches=1, values=weights)  # fmt: skip
        weights.close()
        with torch.no_grad(), par.loss_context():
            loss = par.model(batch[:, :-1], batch[:, 1:])  # every rank the same batch: the loss is the whole model's
        if env.is_main:
            print(json.dumps({"layout": name, "loss": loss.item()}), flush=True)
    # As jobs/training/trainer.py does: free FSDP2's reference cycles while the group lives, or a rank can abort at
    # interpreter exit ("terminate called without an active exception": once in CI under load).
    del par, model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
