"""`slurm-eks local up --stack S` without --nodes follows the twin's controllers until Ctrl-C, printing each step,
then stops them and leaves the pods running (scripts/cli/twin.py follow)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

from rich.console import Console

from scripts.cli.twin import follow
from scripts.twin.scaling import Event


@dataclass
class Controllers:
    events: list[Event] = field(default_factory=list)


@dataclass
class FakeTwin:
    controllers: Controllers
    stopped: bool = False

    def stop_platform(self) -> None:
        self.stopped = True


def test_follow_prints_each_step_and_stops_on_ctrl_c(monkeypatch) -> None:
    twin = FakeTwin(Controllers([Event(1.0, "gpu", "keda-activate", "query 2, replicas 1")]))
    ticks = iter([None, KeyboardInterrupt()])

    def sleep(_s: float) -> None:
        twin.controllers.events.append(Event(2.0, "gpu", "pod-started", "gpu-0"))
        tick = next(ticks)
        if tick is not None:
            raise tick

    monkeypatch.setattr("scripts.cli.twin.time.sleep", sleep)
    out = io.StringIO()
    follow(twin, Console(file=out, width=200))  # type: ignore[arg-type]
    text = out.getvalue()
    assert "gpu: keda-activate query 2, replicas 1" in text and "gpu: pod-started gpu-0" in text
    assert twin.stopped and "the pods run on as they are" in text
