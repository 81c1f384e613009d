"""jobs/recipes/titan.py's own logic, in the main venv: the flags it gives torchtitan, the stop hook in the
trainer's loop, the save on a stop and the parameter count. That torchtitan's Trainer and CheckpointManager have
the loop, attributes and save rule these stand-ins imitate: tests/recipes/test_titan.py (the seams test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_module

torch = require_module("torch", "pip install -e '.[jobs]': the training tests need it")

from jobs.recipes.titan import RecipeError, StopHook, parameter_counts, save_now, titan_args  # noqa: E402

pytestmark = pytest.mark.torch


def test_the_job_directory_goes_first_and_checkpointing_is_on(tmp_path: Path) -> None:
    args = titan_args(["--module", "qwen3", "--config", "qwen3_moe_debug", "activation-checkpoint:full"], tmp_path)
    # ahead of a tyro subcommand, which would take the flags after it as its own
    assert args == ["--dump_folder", str(tmp_path), "--checkpoint.enable", "--module", "qwen3", "--config",
                    "qwen3_moe_debug", "activation-checkpoint:full"]


@pytest.mark.parametrize(("flags", "message"), [
    (["--dump_folder", "/elsewhere"], "--dump_folder /elsewhere: the job script reads the run's markers from"),
    (["--dump-folder=/elsewhere"], "--dump-folder /elsewhere: the job script reads"),
    (["--checkpoint.folder", "/abs"], "--checkpoint.folder /abs: checkpoints stay in the job's directory"),
])  # fmt: skip
def test_other_directories_are_refused(tmp_path: Path, flags: list[str], message: str) -> None:
    with pytest.raises(RecipeError, match=message):
        titan_args(flags, tmp_path)


class Loop:
    """torchtitan's Trainer as the hook sees it: `step`, and `should_continue_training` (step < steps)."""

    def __init__(self, steps: int) -> None:
        self.step, self.steps = 0, steps

    def should_continue_training(self) -> bool:
        return self.step < self.steps

    def train(self) -> None:  # Trainer.train's loop: ask, then step
        while self.should_continue_training():
            self.step += 1


def test_the_ranks_agree_before_every_nth_step_and_stop_after_a_request() -> None:
    asked: list[int] = []
    trainer = Loop(steps=20)

    def agree() -> list[str]:
        asked.append(trainer.step)
        return ["SIGUSR2"] if trainer.step >= 7 else []

    hook = StopHook(trainer, agree, every=3)
    trainer.train()
    assert asked == [0, 3, 6, 9] and trainer.step == 9 and hook.reasons == ["SIGUSR2"]


def test_a_finished_run_does_not_agree_again() -> None:
    asked: list[int] = []
    trainer = Loop(steps=4)
    hook = StopHook(trainer, lambda: asked.append(trainer.step) or [], every=2)
    trainer.train()
    assert asked == [0, 2] and trainer.step == 4 and hook.reasons == []
    with pytest.raises(RecipeError, match="--stop-check-every 0"):
        StopHook(Loop(1), lambda: [], every=0)


class Checkpointer:
    """CheckpointManager as save_now uses it: folder, interval, save (due when the interval divides the step)."""

    def __init__(self, folder: Path, interval: int) -> None:
        self.folder, self.interval, self.saved, self.waited = str(folder), interval, [], 0

    def save(self, step: int) -> None:
        if step % self.interval == 0:
            (Path(self.folder) / f"step-{step}").mkdir(parents=True)
            (Path(self.folder) / f"step-{step}" / ".metadata").touch()
            self.saved.append(step)

    def maybe_wait_for_saving(self) -> None:
        self.waited += 1


def test_a_stop_saves_the_last_step_unless_the_interval_just_did(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path / "checkpoint", interval=500)
    assert save_now(ckpt, 37) == tmp_path / "checkpoint" / "step-37"
    assert ckpt.saved == [37] and ckpt.waited == 1
    assert save_now(ckpt, 37) == tmp_path / "checkpoint" / "step-37" and ckpt.saved == [37]  # complete already


def test_active_parameters_count_top_k_of_the_routed_experts() -> None:
    class Router(torch.nn.Module):
        num_experts, top_k = 8, 2

    class MoE(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.router = Router()
            self.routed_experts = torch.nn.Linear(10, 80, bias=False)  # 800 parameters, 100 an expert
            self.attention = torch.nn.Linear(10, 10, bias=False)

    assert parameter_counts(MoE()) == (900, 100 + 2 * 100)
