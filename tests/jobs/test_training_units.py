"""In-process unit tests of the training modules: schedule, checkpoint dirs, flags (the model's are in
test_model.py, the token data's in test_data.py)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from tests.conftest import require_module

torch = require_module("torch", "pip install -e '.[jobs]': jobs/training needs it")

from jobs.training.checkpoint import checkpoints, latest_complete, prune  # noqa: E402
from jobs.training.config import parse_args  # noqa: E402
from jobs.training.optim import build_scheduler, lr_multiplier  # noqa: E402

pytestmark = pytest.mark.torch


# --- schedule ---------------------------------------------------------------------------------------------


def test_warmup_is_linear_up_to_the_peak() -> None:
    assert [lr_multiplier(s, 4, 20, 0.1) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]


def test_cosine_decays_monotonically_to_the_floor() -> None:
    values = [lr_multiplier(s, 4, 20, 0.1) for s in range(4, 25)]
    assert values[0] == 1.0
    assert all(a > b for a, b in itertools.pairwise(values[:17]))
    assert lr_multiplier(12, 4, 20, 0.1) == pytest.approx(0.55)  # halfway through the cosine
    assert values[16:] == [pytest.approx(0.1)] * 5  # stays at the floor past the end


def test_no_warmup_starts_at_the_peak() -> None:
    assert lr_multiplier(0, 0, 10, 0.0) == 1.0
    assert lr_multiplier(10, 0, 10, 0.0) == pytest.approx(0.0)


def test_scheduler_applies_the_multiplier_to_the_optimizer() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=2.0)
    sched = build_scheduler(opt, warmup_steps=3, total_steps=10, min_ratio=0.2)
    seen = []
    for _ in range(10):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([2.0 * lr_multiplier(s, 3, 10, 0.2) for s in range(10)])
    assert "lr_lambdas" in sched.state_dict() and sched.state_dict()["lr_lambdas"] == [None]


# --- checkpoint directories -------------------------------------------------------------------------------


def make_step(root: Path, step: int, complete: bool) -> Path:
    path = root / f"step-{step}"
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"x")
    if complete:
        (path / ".metadata").write_bytes(b"m")
    return path


def test_latest_complete_skips_torn_and_foreign_dirs(tmp_path: Path) -> None:
    assert latest_complete(tmp_path / "missing") is None
    for step, complete in [(5, True), (10, True), (15, False)]:
        make_step(tmp_path, step, complete)
    (tmp_path / "step-99.old").mkdir()
    (tmp_path / "step-100").write_text("a file, not a checkpoint")
    assert [s for s, _ in checkpoints(tmp_path)] == [5, 10, 15]
    assert latest_complete(tmp_path) == (10, tmp_path / "step-10")


def test_prune_keeps_the_latest_k_complete_and_drops_torn(tmp_path: Path) -> None:
    for step, complete in [(2, True), (4, False), (6, True), (8, True), (10, False)]:
        make_step(tmp_path, step, complete)
    removed = prune(tmp_path, keep=2)
    assert sorted(p.name for p in removed) == ["step-10", "step-2", "step-4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-6", "step-8"]


# --- flags ------------------------------------------------------------------------------------------------


def test_json_config_sets_defaults_that_flags_override(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"d_model": 64, "n_heads": 8, "steps": 30, "fsdp": True}))
    cfg = parse_args(["--config", str(config), "--steps", "40"])
    assert (cfg.model.shape.dim, cfg.model.shape.n_heads, cfg.steps, cfg.fsdp) == (64, 8, 40, True)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--d-model", "30", "--n-heads", "4"], "dim 30 is not divisible by n_heads 4"),
        (["--steps", "0"], "must be >= 1"),
        (["--dropout", "1.5"], r"must be in \[0, 1\)"),
        (["--warmup-steps", "100", "--steps", "50"], "must be < --steps"),
        (["--data", "/nonexistent/tokens.bin"], "no such file"),
        (["--data-dtype", "int8"], "invalid choice"),
    ],
)
def test_bad_flags_exit_with_a_clear_message(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert re.search(message, capsys.readouterr().err)


def test_json_config_rejects_unknown_keys(tmp_path: Path, capsys) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"d_modle": 64}))
    with pytest.raises(SystemExit):
        parse_args(["--config", str(config)])
    assert "unknown keys ['d_modle']" in capsys.readouterr().err


# --- the stop agreement -----------------------------------------------------------------------------------

def test_the_stop_agreement_carries_the_time_since_the_last_in_the_same_reduction(tmp_path: Path) -> None:
    import signal

    from jobs.training.distributed import DistEnv
    from jobs.training.preemption import STOP_SIGNALS, StopRequest

    saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        stop = StopRequest(tmp_path / "STOP", poll_file=True)
        env = DistEnv(0, 0, 1, torch.device("cpu"))  # no process group: the reduction is the identity
        assert stop.agree(env, 1234) == ([], 1234)
        (tmp_path / "STOP").touch()
        assert stop.agree(env, 99) == (["stop-file"], 99) and stop.agreed(env) == ["stop-file"]
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_stop_checks_default_to_the_time_based_cadence() -> None:
    assert parse_args([]).stop_check_every is None
    assert parse_args(["--stop-check-every", "10"]).stop_check_every == 10
