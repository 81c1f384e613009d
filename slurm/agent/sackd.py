"""sackd before the agent: Slurm 25.11's clients (scontrol, squeue, sacctmgr, sbatch) get their credentials from
sackd's socket (SchedMD/slurm slurm-25.11 src/plugins/auth/slurm/external.c `create_external` -> `sack_create`),
which sackd serves at <RUNTIME_DIRECTORY or /run/slurm>/sack.socket once it has fetched the configuration from
slurmctld (src/sackd/sackd.c: DEFAULT_RUN_DIR, `_establish_config_source`). It runs as SlurmUser, as sackd expects
(sackd.c warns "sackd running as <user> instead of SlurmUser"), and reads the key SLURM_SACK_KEY names
(src/plugins/auth/slurm/internal.c `init_internal`; `_check_key_permissions` refuses a key others may read).

The image's pods start it here rather than through a shell script in a ConfigMap: the agent owns its start.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

SOCKET = Path("/run/slurm/sack.socket")  # Slinky's login readiness probe checks the same path
WAIT_SECONDS = 120  # slurmctld may still be starting right after the first `pulumi up`


class SackdError(RuntimeError):
    """sackd did not serve its socket in time (slurmctld unreachable, or the key refused)."""


def start(conf_server: str, socket: Path = SOCKET, wait_seconds: float = WAIT_SECONDS,
          run: Callable[[list[str]], int] = lambda argv: subprocess.call(argv),
          sleep: Callable[[float], None] = time.sleep) -> None:
    """`sackd --conf-server <host:port> --disable-reconfig` (it daemonizes), then wait for its socket."""
    status = run(["sackd", "--conf-server", conf_server, "--disable-reconfig"])
    if status != 0:
        raise SackdError(f"sackd --conf-server {conf_server} exited with status {status}")
    deadline = time.monotonic() + wait_seconds
    while not socket.is_socket():
        if time.monotonic() >= deadline:
            raise SackdError(f"no configuration from {conf_server} in {wait_seconds:g} s ({socket} missing)")
        sleep(2)
