"""The parallel layout (pipeline x data replicate x data shard x tensor) and the one DeviceMesh it names.

As in torchtitan (pytorch/torchtitan `torchtitan/distributed/parallel_dims.py`, `ParallelDims`), one mesh with
named dims "pp", "dp_replicate", "dp_shard", "tp", outermost first: "tp" is innermost, so a tensor-parallel
group is consecutive ranks, inside a node; "pp" is outermost, so a pipeline stage spans whole nodes. A dim of
size 1 is left out of the mesh (torchtitan gives those a fake backend): each present dim costs a process
group per rank set, and one of world size reuses the default group. "dp_shard" stays under --fsdp even at
size 1, as torchtitan keeps its "fsdp" dim, so fully_shard still applies its MixedPrecisionPolicy.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from jobs.training.presets import ModelShape

MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "tp")


@dataclass(frozen=True)
class ParallelDims:
    """Degrees of the four dims; world size = their product. `fsdp`: FSDP2 over dp_shard (HSDP when
    dp_replicate > 1 too); otherwise DDP over every rank (dp_replicate = world size)."""

    pp: int
    dp_replicate: int
    dp_shard: int
    tp: int
    fsdp: bool

    @property
    def dp(self) -> int:
        """Data-parallel replicas of the model, each reading its own batches."""
        return self.dp_replicate * self.dp_shard

    @property
    def world_size(self) -> int:
        return self.pp * self.dp * self.tp

    def sizes(self) -> dict[str, int]:
        return dict(zip(MESH_DIMS, (self.pp, self.dp_replicate, self.dp_shard, self.tp), strict=True))

    def mesh_dims(self) -> dict[str, int]:
        """The dims the mesh holds: those above 1, dp_shard under --fsdp, and one dim at least."""
        dims = {n: d for n, d in self.sizes().items() if d > 1 or (n == "dp_shard" and self.fsdp)}
        return dims or {"dp_replicate": 1}

    def describe(self) -> str:
        """e.g. "fsdp2 dp_shard=2 tp=2", "ddp dp_replicate=4": the data parallelism, then the degrees above 1."""
        degrees = [f"{n}={d}" for n, d in self.sizes().items() if d > 1]
        return " ".join(["fsdp2" if self.fsdp else "ddp", *degrees])


def parallel_dims(
    world_size: int, local_world_size: int, *, tp: int, pp: int, dp_replicate: int, fsdp: bool
) -> ParallelDims:
    """The layout for --tp, --pp, --dp-replicate and --fsdp on this world; ValueError says what does not fit.
    dp_shard takes the rest: world / (pp x dp_replicate x tp)."""
    if problem := fsdp_problem(tp=tp, pp=pp, dp_replicate=dp_replicate, fsdp=fsdp):
        raise ValueError(problem)
    if not fsdp:
        return ParallelDims(pp=1, dp_replicate=world_size, dp_shard=1, tp=1, fsdp=False)
    other = pp * dp_replicate * tp
    if world_size % other:
        raise ValueError(f"world size {world_size} is not divisible by pp {pp} x dp_replicate {dp_replicate} x "
                         f"tp {tp} = {other}: dp_shard would not be whole")  # fmt: skip
    if local_world_size % tp:
        raise ValueError(f"--tp {tp} does not divide the {local_world_size} devices of a node (LOCAL_WORLD_SIZE): "
                         "tensor parallelism communicates in every layer, so its group stays in a node")  # fmt: skip
    return ParallelDims(pp=pp, dp_replicate=dp_replicate, dp_shard=world_size // other, tp=tp, fsdp=True)


def fsdp_problem(*, tp: int, pp: int, dp_replicate: int, fsdp: bool) -> str | None:
    """Why the flags need --fsdp, if they do: torchtitan's classic parallelize_llama refuses DDP with any other
    dim ("DDP has not supported > 1D parallelism")."""
    given = [f"--{n} {d}" for n, d in (("tp", tp), ("pp", pp), ("dp-replicate", dp_replicate)) if d > 1]
    if fsdp or not given:
        return None
    return (f"{' '.join(given)} needs --fsdp: tensor and pipeline parallelism and HSDP compose with FSDP2 "
            "(fully_shard over dp_shard, which may be 1), not with DDP")  # fmt: skip


def model_problems(shape: ModelShape, seq_len: int, grad_accum: int, *, tp: int, pp: int) -> list[str]:
    """What in the model or the batch keeps --tp/--pp from splitting it (empty when fine)."""
    found = []
    if tp > 1:
        # Colwise/rowwise shards: whole heads per rank (attention infers the local head count from the
        # tensor), whole SwiGLU columns, whole vocabulary rows; sequence parallelism shards the sequence
        # into equal plain-tensor pieces (torchtitan asserts seq_len % tp: use_local_output=True).
        sizes = {"n_heads": shape.n_heads, "n_kv_heads": shape.n_kv_heads, "ffn_dim": shape.ffn_dim,
                 "vocab_size": shape.vocab_size, "seq_len": seq_len}  # fmt: skip
        found += [f"{name} {size} is not divisible by --tp {tp}" for name, size in sizes.items() if size % tp]
    if pp > 1:
        if shape.n_layers < pp:
            found.append(f"n_layers {shape.n_layers} < --pp {pp}: every pipeline stage needs a layer")
        if shape.tie_embeddings:
            found.append("tied embeddings cannot be split across pipeline stages (tok_embeddings on the first, "
                         "output on the last)")  # fmt: skip
        if grad_accum < pp:
            # torch.distributed.pipelining.Schedule1F1B refuses fewer micro-batches than stages.
            found.append(f"--grad-accum {grad_accum} < --pp {pp}: the 1F1B schedule runs --grad-accum "
                         "micro-batches and needs one per stage at least")  # fmt: skip
    return found


def build_mesh(dims: ParallelDims, device_type: str) -> DeviceMesh:
    """The mesh of `dims.mesh_dims()`, outermost first (collective: every rank calls it)."""
    present = dims.mesh_dims()
    return init_device_mesh(device_type, tuple(present.values()), mesh_dim_names=tuple(present))


def submesh(mesh: DeviceMesh, *names: str) -> DeviceMesh | None:
    """The mesh of those of `names` the mesh holds (in mesh order), or None when it holds none."""
    held = tuple(n for n in mesh.mesh_dim_names or () if n in names)
    return mesh[held] if held else None


def coordinate(mesh: DeviceMesh, name: str) -> int:
    """This rank's index along dim `name` (0 for a dim left out at size 1)."""
    return mesh.get_local_rank(name) if name in (mesh.mesh_dim_names or ()) else 0


def dp_rank(mesh: DeviceMesh, dims: ParallelDims) -> int:
    """Which data-parallel replica this rank belongs to: its tp and pp peers read the same batches."""
    return coordinate(mesh, "dp_replicate") * dims.dp_shard + coordinate(mesh, "dp_shard")


def first_of_stage(mesh: DeviceMesh) -> bool:
    """Whether this rank is index 0 of its pipeline stage's data- and tensor-parallel ranks, which between them
    hold one copy of the stage: one rank per stage is enough to read the stage's full weights."""
    return all(coordinate(mesh, name) == 0 for name in ("dp_replicate", "dp_shard", "tp"))
