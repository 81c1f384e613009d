"""How often the ranks of a run agree on a stop request (jobs/training/preemption.py), and so how long a stop
request can wait before training acts on it. Standard library only: the job renderer (jobs/render.py) sizes
the USR2 lead from the same numbers on the login pod, where torch is not installed.

The agreement is a collective (an all-reduce of a few CPU integers on gloo, which every rank's host thread
waits for), so it is not free: with hundreds of ranks it costs milliseconds, which a step of 0.1 s feels and a
step of 200 s does not. A fixed number of steps between agreements is wrong at one end or the other: 10 steps
of a 70B model at ~213 s a step make a stop request wait up to 35 minutes, past any sensible signal lead,
while every step of a small model pays the collective each step. So by default the interval follows the time:
the ranks agree about every STOP_CHECK_SECONDS of training, and after every step when a step takes longer.
The seconds come from the agreement itself (each rank adds the time since the previous one, the all-reduce
takes the maximum), so every rank computes the same interval and calls the collective at the same steps, at
no extra cost. `--stop-check-every N` still fixes N steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# The most a stop request waits for the ranks' agreement when steps are shorter than this: a collective every
# 10 s is noise at any scale, and 10 s is nothing beside a checkpoint's write.
STOP_CHECK_SECONDS = 10.0
# The recipes' `--stop-check-every` default (jobs/recipes/hf_finetune.py, bert_pretrain.py, titan.py): every optimizer
# step (a fine-tune or mixture-of-experts step is long).
RECIPE_STOP_CHECK_EVERY = 1
# The entry points that take it (file names as the job's command line gives them).
RECIPES = ("hf_finetune.py", "bert_pretrain.py", "titan.py")


def stop_wait_seconds(step_seconds: float, every: int | None) -> float:
    """The longest a stop request waits for the ranks to agree on it: `every` steps when the interval is fixed,
    else STOP_CHECK_SECONDS or one step, whichever is longer (the request lands just after an agreement)."""
    return every * step_seconds if every else max(step_seconds, STOP_CHECK_SECONDS)


class StopCadence:
    """At which steps to agree: every `every` steps, or (None) about every `seconds` of training, measured
    between agreements as the slowest rank saw it."""

    def __init__(self, every: int | None, seconds: float = STOP_CHECK_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.seconds, self._clock = every, seconds, clock
        self.interval = every or 1  # time-based: every step until a step's length is known
        self._last_step, self._last_time = 0, clock()

    def due(self, step: int) -> bool:
        """Agree after this step? Call once per step with the steps done so far."""
        return step - self._last_step >= self.interval

    def elapsed_ms(self) -> int:
        """This rank's milliseconds since the previous agreement (or the start), for the agreement to reduce."""
        return int((self._clock() - self._last_time) * 1000)

    def agreed(self, step: int, slowest_ms: int) -> None:
        """After an agreement at `step`: the next interval, from the slowest rank's time over the last one."""
        steps = step - self._last_step
        if self.every is None and steps > 0 and slowest_ms > 0:
            per_step = slowest_ms / 1000 / steps
            self.interval = max(1, int(self.seconds / per_step))
        self._last_step, self._last_time = step, self._clock()
