"""The `slurm-eks` console script's entry point: it imports the command-line tool (seconds of imports on a busy
machine) inside the handlers, so a Ctrl-C or an OS error at any moment, importing included, is one line and an exit
status, never a traceback."""

from __future__ import annotations

import signal
import sys

from scripts.cli.exits import CONFIG_ERROR_EXIT, INTERRUPTED_EXIT


def main() -> None:
    try:
        from scripts.cli.main import app

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
