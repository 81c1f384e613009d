"""The `slurm-eks` console script's entry point: it imports the command-line tool (seconds of imports on a busy
machine) inside the handlers, so a Ctrl-C or an OS error at any moment, importing included, is one line and an exit
status, never a traceback."""

from __future__ import annotations

import os
import signal
import sys
import threading

from scripts.cli.exits import CONFIG_ERROR_EXIT, INTERRUPTED_EXIT

# After Ctrl-C, how long the command has to stop by itself (a KeyboardInterrupt unwinding, files cleaned up) before
# the process ends anyway: Pulumi's runtime, while a plan runs under its mocks, catches the KeyboardInterrupt inside
# one of its tasks, and its event loop then waits forever. Nothing is written while planning (a plan is written only
# once whole: scripts/offline/plan.py write_plan), so ending the process then loses nothing.
INTERRUPT_GRACE_S = 5.0


def _interrupted(signum: int, frame: object) -> None:
    def give_up() -> None:
        print("interrupted", file=sys.stderr, flush=True)
        os._exit(INTERRUPTED_EXIT)

    timer = threading.Timer(INTERRUPT_GRACE_S, give_up)
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted)
    try:
        from scripts.cli.main import app
        from scripts.offline import plan_cache

        os.environ.setdefault(plan_cache.ENV, "1")  # the console script reuses plans (and so do its children)
        plan_cache.on_planning = _say  # a plan takes 10-30 s: say so before it starts

        app()
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(f"error:{where}: {exc.strerror or exc}; check the path and its permissions, then run again",
              file=sys.stderr)
        sys.exit(CONFIG_ERROR_EXIT)
    except KeyboardInterrupt:  # commands that write say what they left (plan); the rest wrote nothing yet
        print("interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    finally:
        # The command has its exit status: a Ctrl-C while the interpreter joins its threads would end the process
        # by the signal instead (status -2, after the work was done and said).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
