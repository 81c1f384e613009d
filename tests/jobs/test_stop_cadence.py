"""When the ranks agree on a stop (jobs/training/cadence.py): about every 10 s of training, after every step
once steps are longer, at the same steps on every rank, and never later than the wait `job render` sizes the
USR2 lead for (stop_wait_seconds). A simulated run: the ranks' clocks advance by their step times, and each
agreement hands every rank the slowest rank's time, as the all-reduce does."""

from __future__ import annotations

import math

import pytest

from jobs.training.cadence import STOP_CHECK_SECONDS, StopCadence, stop_wait_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(step_seconds: list[float], steps: int, every: int | None = None,
             stop_at: float | None = None) -> tuple[list[list[int]], float | None]:
    """Ranks whose steps take `step_seconds` each (the collective makes them wait for the slowest): the steps
    at which each rank agrees, and the seconds from a stop request at `stop_at` to the agreement that sees it."""
    clocks = [Clock() for _ in step_seconds]
    cadences = [StopCadence(every, clock=c) for c in clocks]
    agreed: list[list[int]] = [[] for _ in step_seconds]
    now, waited = 0.0, None
    for step in range(1, steps + 1):
        now += max(step_seconds)  # data-parallel ranks move at the slowest one's pace
        for clock in clocks:
            clock.now = now
        due = [c.due(step) for c in cadences]
        assert len(set(due)) == 1, f"ranks disagree on whether to agree after step {step}: a collective would hang"
        if due[0]:
            slowest = max(c.elapsed_ms() for c in cadences)  # the all-reduce's MAX
            for rank, cadence in enumerate(cadences):
                cadence.agreed(step, slowest)
                agreed[rank].append(step)
            if stop_at is not None and waited is None and now >= stop_at:
                waited = now - stop_at
    return agreed, waited


@pytest.mark.parametrize("step", [0.05, 0.3, 1.0, 3.7, 9.9, 10.0, 10.1, 60.0, 213.0])
def test_the_wait_is_at_most_ten_seconds_or_one_step(step: float) -> None:
    steps = math.ceil(400 / step) + 50
    for stop_at in (step * 7 + 1e-6, step * 19 + step / 2, 300.0):  # just after a step, mid-step, anywhere
        agreed, waited = simulate([step, step * 0.9], steps, stop_at=stop_at)
        assert agreed[0] == agreed[1]
        assert waited is not None and waited <= stop_wait_seconds(step, None) + 1e-9, (step, stop_at, waited)
    assert stop_wait_seconds(step, None) == max(step, STOP_CHECK_SECONDS)


def test_short_steps_agree_rarely_and_long_ones_every_step() -> None:
    fast, _ = simulate([0.05, 0.04], 2000)
    gaps = {b - a for a, b in zip(fast[0][2:], fast[0][3:], strict=False)}
    assert gaps == {200}  # 10 s / 0.05 s: one collective per 200 steps, not per step
    slow, _ = simulate([213.0, 200.0], 20)
    assert slow[0] == list(range(1, 21))  # a 213 s step: the ranks agree after every one


def test_a_fixed_interval_is_kept_and_its_wait_is_that_many_steps() -> None:
    agreed, waited = simulate([213.0, 213.0], 40, every=10, stop_at=213.0 * 10 + 1)
    assert agreed[0] == [10, 20, 30, 40]
    assert waited == pytest.approx(213.0 * 10 - 1) and waited <= stop_wait_seconds(213.0, 10)
    assert stop_wait_seconds(213.0, 10) == 2130.0


def test_a_slow_rank_sets_the_pace_for_all() -> None:
    """Clocks that disagree (one rank's host is slower) still give one interval: the all-reduce's maximum."""
    clocks = [Clock(), Clock()]
    cadences = [StopCadence(None, clock=c) for c in clocks]
    clocks[0].now, clocks[1].now = 1.0, 2.5  # one step: 1 s on rank 0, 2.5 s on rank 1
    slowest = max(c.elapsed_ms() for c in cadences)
    for c in cadences:
        c.agreed(1, slowest)
    assert [c.interval for c in cadences] == [4, 4]  # 10 s / 2.5 s
