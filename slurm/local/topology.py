"""This machine as Slurm sees it (`slurmd -C`), so slurm.conf matches what slurmd will report."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from slurm.local.errors import LocalSlurmError


@dataclass(frozen=True)
class NodeTopology:
    name: str
    cpus: int
    boards: int
    sockets_per_board: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mb: int


def parse_slurmd_c(text: str, hostname: str) -> NodeTopology:
    """Parse the first line of `slurmd -C` (``NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    fields = dict(item.split("=", 1) for item in first.split() if "=" in item)
    try:
        return NodeTopology(
            name=hostname,
            cpus=int(fields["CPUs"]),
            boards=int(fields.get("Boards", 1)),
            sockets_per_board=int(fields["SocketsPerBoard"]),
            cores_per_socket=int(fields["CoresPerSocket"]),
            threads_per_core=int(fields["ThreadsPerCore"]),
            real_memory_mb=int(fields["RealMemory"]),
        )
    except (KeyError, ValueError) as exc:
        raise LocalSlurmError(f"cannot read the node topology from `slurmd -C` output {first!r}") from exc


def detect_node() -> NodeTopology:
    """Topology of this machine under its short host name (the NodeName slurmd registers as)."""
    hostname = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    # Before slurm.conf exists slurmd -C still works; it only prints a config-source warning on stderr.
    result = subprocess.run(["slurmd", "-C"], capture_output=True, text=True)
    if result.returncode != 0:
        raise LocalSlurmError(f"`slurmd -C` failed: {result.stderr.strip()}")
    return parse_slurmd_c(result.stdout, hostname)
