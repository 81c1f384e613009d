"""`python3 -m slurm.agent.accounts {plan,apply} --desired FILE`: the reconcile with the standard library only, as
the in-cluster Job runs it. Exit status 1 with the reason on stderr when it cannot plan or apply."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slurm.agent.accounts.errors import AccountsError
from slurm.agent.accounts.reconcile import apply_file, plan_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m slurm.agent.accounts",
                                     description="Reconcile Slurm accounts, users and QoS with sacctmgr.")
    parser.add_argument("command", choices=["plan", "apply"])
    parser.add_argument("--desired", type=Path, required=True, help="the desired-state JSON document")
    args = parser.parse_args(argv)
    try:
        if args.command == "plan":
            print(plan_file(args.desired), end="")
        else:
            apply_file(args.desired, lambda text: print(text, flush=True))
    except AccountsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
