"""Parallelism from one device mesh (jobs/training/mesh.py, tensor_parallel.py, pipeline.py): the layout's
validation in process; under real torchrun (4 CPU workers, gloo), every layout starts from the same weights and
computes the same loss and gradients (tests/jobs/parallel_layouts.py), TP=2 x DP=2 and PP=2 x DP=2 train to
DP=4's losses, and each of the three resumes bit-for-bit from a stop mid-run.

10 torchrun starts (the layouts script, 3 uninterrupted runs, 3 x stop + resume): about 8 minutes on 2 CPU cores
shared with other jobs (each start 40-100 s there, mostly imports), the in-process tests 1 s."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import require_module
from tests.jobs import runs
from tests.jobs.runs import Run, complete_steps, once_at_step, stop_file

torch = require_module("torch", "pip install -e '.[jobs]': the training tests need it")

from jobs.training.config import ModelConfig, parse_args  # noqa: E402
from jobs.training.mesh import ParallelDims, fsdp_problem, model_problems, parallel_dims  # noqa: E402
from jobs.training.model import Transformer  # noqa: E402
from jobs.training.pipeline import split_stage, stage_layers  # noqa: E402
from jobs.training.presets import ModelShape  # noqa: E402

pytestmark = pytest.mark.torch

SHAPE = ModelShape(dim=32, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=64, vocab_size=64)
# One step from the same weights (parallel_layouts.py) against the unsharded model, measured: losses equal in 8
# of 9 layouts and 9.5e-7 apart with tied embeddings under TP (5.9428005 vs 5.9428015), gradient norms at most
# 1.2e-7 apart (fp32 sums in another order).
LOSS_TOL = 1e-5
# Eight steps of training, logged losses (rounded to 5 decimals) against DDP on 4 ranks, measured: TP 2 x DP 2
# and PP 2 x DP 2 both equal in all 8 steps (grad norms too, to 4 decimals). Two units of the last logged
# place, as a sub-1e-6 difference can still round to the neighbouring value.
TRAIN_TOL = 2e-5


# --- the layout ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("world", "flags", "dims", "mesh", "described"),
    [
        (4, {}, (1, 4, 1, 1), {"dp_replicate": 4}, "ddp dp_replicate=4"),
        (1, {}, (1, 1, 1, 1), {"dp_replicate": 1}, "ddp"),
        (4, {"fsdp": True}, (1, 1, 4, 1), {"dp_shard": 4}, "fsdp2 dp_shard=4"),
        (8, {"fsdp": True, "dp_replicate": 2}, (1, 2, 4, 1), {"dp_replicate": 2, "dp_shard": 4},
         "fsdp2 dp_replicate=2 dp_shard=4"),
        (4, {"fsdp": True, "tp": 2}, (1, 1, 2, 2), {"dp_shard": 2, "tp": 2}, "fsdp2 dp_shard=2 tp=2"),
        # dp_shard stays in the mesh at 1 under --fsdp: fully_shard still casts to bf16 there
        (4, {"fsdp": True, "tp": 2, "pp": 2}, (2, 1, 1, 2), {"pp": 2, "dp_shard": 1, "tp": 2}, "fsdp2 pp=2 tp=2"),
        (16, {"fsdp": True, "tp": 2, "pp": 2, "dp_replicate": 2}, (2, 2, 2, 2),
         {"pp": 2, "dp_replicate": 2, "dp_shard": 2, "tp": 2}, "fsdp2 pp=2 dp_replicate=2 dp_shard=2 tp=2"),
    ],
)  # fmt: skip
def test_layout_from_flags(
    world: int, flags: dict[str, object], dims: tuple[int, int, int, int], mesh: dict[str, int], described: str
) -> None:
    args = {"tp": 1, "pp": 1, "dp_replicate": 1, "fsdp": False, **flags}
    got = parallel_dims(world, min(world, 8), **args)  # type: ignore[arg-type]
    assert (got.pp, got.dp_replicate, got.dp_shard, got.tp) == dims
    assert got.world_size == world and got.dp == dims[1] * dims[2]
    assert got.mesh_dims() == mesh
    assert got.describe() == described


@pytest.mark.parametrize(
    ("world", "local", "flags", "message"),
    [
        (6, 6, {"fsdp": True, "tp": 4}, "world size 6 is not divisible by pp 1 x dp_replicate 1 x tp 4 = 4"),
        (8, 8, {"fsdp": True, "tp": 2, "pp": 3}, "world size 8 is not divisible by pp 3 x dp_replicate 1 x tp 2"),
        (16, 4, {"fsdp": True, "tp": 8}, "--tp 8 does not divide the 4 devices of a node"),
        (12, 4, {"fsdp": True, "tp": 3}, "--tp 3 does not divide the 4 devices of a node"),
        (4, 4, {"tp": 2}, "--tp 2 needs --fsdp"),
        (4, 4, {"pp": 2}, "--pp 2 needs --fsdp"),
        (4, 4, {"dp_replicate": 2}, "--dp-replicate 2 needs --fsdp"),
    ],
)
def test_layouts_that_do_not_fit_say_why(world: int, local: int, flags: dict[str, object], message: str) -> None:
    args = {"tp": 1, "pp": 1, "dp_replicate": 1, "fsdp": False, **flags}
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        parallel_dims(world, local, **args)  # type: ignore[arg-type]


def test_a_model_that_splits_has_no_problems() -> None:
    assert model_problems(SHAPE, 16, 4, tp=2, pp=4) == []
    assert model_problems(SHAPE, 15, 1, tp=1, pp=1) == []  # nothing to split: no constraint


@pytest.mark.parametrize(
    ("shape", "seq_len", "grad_accum", "tp", "pp", "problem"),
    [
        (SHAPE, 16, 1, 4, 1, "n_kv_heads 2 is not divisible by --tp 4"),
        (ModelShape(32, 4, 4, 4, 64, 64), 16, 1, 8, 1, "n_heads 4 is not divisible by --tp 8"),
        (ModelShape(32, 4, 4, 4, 60, 64), 16, 1, 8, 1, "ffn_dim 60 is not divisible by --tp 8"),
        (ModelShape(32, 4, 4, 2, 64, 63), 16, 1, 2, 1, "vocab_size 63 is not divisible by --tp 2"),
        (SHAPE, 15, 1, 2, 1, "seq_len 15 is not divisible by --tp 2"),
        (SHAPE, 16, 8, 1, 8, "n_layers 4 < --pp 8: every pipeline stage needs a layer"),
        (ModelShape(32, 4, 4, 2, 64, 64, tie_embeddings=True), 16, 2, 1, 2, "tied embeddings cannot be split"),
        (SHAPE, 16, 1, 1, 2, "--grad-accum 1 < --pp 2: the 1F1B schedule"),
    ],
)
def test_model_problems_name_the_dimension(
    shape: ModelShape, seq_len: int, grad_accum: int, tp: int, pp: int, problem: str
) -> None:
    problems = model_problems(shape, seq_len, grad_accum, tp=tp, pp=pp)
    assert any(p.startswith(problem) for p in problems), problems


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tp", "2"], "--tp 2 needs --fsdp"),
        (["--fsdp", "--tp", "3"], "--tp 3 --pp 1: n_heads 4 is not divisible by --tp 3"),
        (["--fsdp", "--pp", "4", "--grad-accum", "2"], "n_layers 2 < --pp 4"),
        (["--fsdp", "--pp", "2", "--model", "llama3-1b", "--grad-accum", "2"], "tied embeddings cannot be split"),
        (["--device", "xla", "--dp-replicate", "2"], "--tp, --pp and --dp-replicate are for CUDA, Neuron and the CPU"),
    ],
)
def test_flags_that_cannot_split_the_model_stop_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_layout_flags_reach_the_config() -> None:
    cfg = parse_args(["--fsdp", "--tp", "2", "--pp", "2", "--dp-replicate", "2", "--grad-accum", "2"])
    assert (cfg.fsdp, cfg.tp, cfg.pp, cfg.dp_replicate) == (True, 2, 2, 2)
    assert fsdp_problem(tp=1, pp=1, dp_replicate=1, fsdp=False) is None


def test_describe_lists_only_degrees_above_one() -> None:
    assert ParallelDims(pp=2, dp_replicate=1, dp_shard=2, tp=1, fsdp=True).describe() == "fsdp2 pp=2 dp_shard=2"


# --- the pipeline split ----------------------------------------------------------------------------------


def test_stages_take_contiguous_layers_earlier_ones_the_remainder() -> None:
    assert [list(stage_layers(5, 2, s)) for s in range(2)] == [[0, 1, 2], [3, 4]]
    assert [list(stage_layers(7, 3, s)) for s in range(3)] == [[0, 1, 2], [3, 4], [5, 6]]
    assert [list(stage_layers(4, 4, s)) for s in range(4)] == [[0], [1], [2], [3]]


def test_a_stage_keeps_the_whole_models_names_and_weights() -> None:
    whole = Transformer(ModelConfig(SHAPE, 16, 0.0))
    names = dict(whole.named_parameters())
    parts = []
    for stage in range(3):
        model = Transformer(ModelConfig(SHAPE, 16, 0.0))
        model.load_state_dict(whole.state_dict())
        split_stage(model, stage, 3)
        parts.append(dict(model.named_parameters()))
    layers = [sorted({n.split(".")[1] for n in p if n.startswith("layers.")}) for p in parts]
    assert layers == [["0", "1"], ["2"], ["3"]]
    assert "tok_embeddings.weight" in parts[0] and not any("tok_embeddings.weight" in p for p in parts[1:])
    assert all("output.weight" not in p and "norm.weight" not in p for p in parts[:2])
    assert {"norm.weight", "output.weight"} <= parts[2].keys()
    merged = {n: t for p in parts for n, t in p.items()}
    assert merged.keys() == names.keys()  # every parameter in exactly one stage, under its own name
    assert sum(len(p) for p in parts) == len(names)
    assert all(torch.equal(merged[n], names[n]) for n in names)


# --- under torchrun: 4 CPU workers, gloo ------------------------------------------------------------------

NPROC = 4
LAYOUTS_SCRIPT = Path(__file__).with_name("parallel_layouts.py")
STEPS, EVERY = 8, 4
# Dropout 0 (TINY has 0.1): each rank draws its own masks, so layouts with other ranks drop other units.
COMMON = ["--dropout", "0", "--steps", str(STEPS), "--checkpoint-every", str(EVERY)]
# The same global batch of 16 sequences per micro-step: 4 replicas x 4, or 2 replicas x 8.
TRAINED = {
    "dp4": ["--batch-size", "4"],
    "tp2-dp2": ["--fsdp", "--tp", "2", "--batch-size", "8"],
    "pp2-dp2": ["--fsdp", "--pp", "2", "--batch-size", "8"],
}


OnEvent = Callable[[dict[str, object], subprocess.Popen[str]], None]


def train(ckpt: Path, layout: str, on_event: OnEvent | None = None) -> Run:
    return runs.torchrun(ckpt, [*COMMON, *TRAINED[layout]], on_event=on_event, nproc=NPROC, timeout=600)


@cache
def _reference(layout: str, root: Path) -> Run:
    run = train(root / f"reference-{layout}", layout)
    assert run.rc == 0, run.stderr[-3000:]
    return run


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """The uninterrupted run of a layout of TRAINED, once per module."""
    root = tmp_path_factory.mktemp("reference")
    return lambda layout: _reference(layout, root)


def test_every_layout_starts_from_the_same_weights_and_computes_the_same_step() -> None:
    cmd = [*runs.torchrun_command(), "--standalone", f"--nproc_per_node={NPROC}", str(LAYOUTS_SCRIPT)]
    run = runs.launch(cmd, timeout=600)
    assert run.rc == 0, run.stderr[-3000:]
    results = run.events
    assert len(results) == 9
    assert [str(r["layout"]).split(",")[0] for r in results] == [r["described"] for r in results]
    for r in results:
        # loss parallelism: under TP each rank holds the logits of its V / tp of the vocabulary, never all of it
        assert r["logits_width"] == SHAPE.vocab_size // (2 if "tp=2" in r["layout"] else 1), r
        assert r["same_digest"], r
        assert abs(r["loss"] - r["expected_loss"]) <= LOSS_TOL, r
        assert abs(r["grad_norm"] - r["expected_grad_norm"]) <= LOSS_TOL, r


def losses(run: Run) -> list[float]:
    return [float(e["loss"]) for e in run.events if "loss" in e]  # type: ignore[arg-type]


@pytest.mark.parametrize("layout", ["tp2-dp2", "pp2-dp2"])
def test_tensor_and_pipeline_parallel_train_to_data_parallel_losses(
    layout: str, reference: Callable[[str], Run]
) -> None:
    described = {"tp2-dp2": "fsdp2 dp_shard=2 tp=2", "pp2-dp2": "fsdp2 pp=2 dp_shard=2"}[layout]
    assert reference(layout).last("start")["parallelism"] == described
    assert reference("dp4").last("start")["parallelism"] == "ddp dp_replicate=4"
    expected, got = losses(reference("dp4")), losses(reference(layout))
    assert len(got) == len(expected) == STEPS
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) <= TRAIN_TOL, (got, expected)


# dp4: DDP on more than 2 ranks, where the order of the all-reduce's additions shows in the bits; its first
# step after a resume used to reduce in DDP's construction-time bucket layout, unlike the same step
# uninterrupted (jobs/training/parallelize.py settle_ddp_buckets). 2 ranks cannot tell: a + b == b + a.
@pytest.mark.parametrize("layout", ["dp4", "tp2-dp2", "pp2-dp2"])
def test_stopped_and_resumed_is_bit_for_bit(layout: str, tmp_path: Path, reference: Callable[[str], Run]) -> None:
    ckpt = tmp_path / "ckpt"
    stopped = train(ckpt, layout, once_at_step(2, lambda _: stop_file(ckpt).touch()))
    stop_step = int(stopped.last("preempted")["step"])  # type: ignore[call-overload]
    assert stopped.rc == 0 and 2 <= stop_step < STEPS and stop_step in complete_steps(ckpt)
    resumed = train(ckpt, layout)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert resumed.last("resumed")["step"] == stop_step
    assert resumed.last("done")["params_sha256"] == reference(layout).last("done")["params_sha256"]
