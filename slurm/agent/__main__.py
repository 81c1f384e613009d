"""`python3 -m slurm.agent <agent> [--conf-server HOST:PORT] ...`: the image's entry point (slurm/agent/Dockerfile
ENTRYPOINT), one agent per subcommand (contract.AGENTS). With --conf-server it first starts sackd (sackd.py), so
the agent's Slurm clients can sign their requests; the local tests call the agents without it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from slurm.agent import contract, sackd


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m slurm.agent", description="The slurm-eks in-cluster agents.")
    parser.add_argument("agent", choices=contract.AGENTS)
    parser.add_argument(contract.CONF_SERVER_OPTION, dest="conf_server",
                        help="slurmctld's address: start sackd and wait for its socket first")
    args, rest = parser.parse_known_args(argv)
    if args.conf_server:
        try:
            sackd.start(args.conf_server)
        except sackd.SackdError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.agent == contract.LIFECYCLE_AGENT:
        from slurm.agent.health.__main__ import main as lifecycle  # each agent imports only its own clients

        lifecycle(rest)
        return 0
    from slurm.agent.accounts.__main__ import main as accounts

    return accounts(["apply", *rest])


if __name__ == "__main__":
    sys.exit(main())
