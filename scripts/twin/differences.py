"""Where the twin differs from the cluster, generated for docs/architecture.md from what the twin runs: the stand-in
table (standin_table.py), the slurm.conf and cgroup.conf changes (cluster.py), the versions, and the departures
written here. `python -m scripts.twin.differences` rewrites the block; tests/twin/test_differences.py keeps it in step.
"""

from __future__ import annotations

from pathlib import Path

from components.config.slinky_releases import SERIES
from scripts import doc_blocks
from scripts.twin.cluster import TWIN_CGROUP_CONF, TWIN_SLURM_CONF
from scripts.twin.errors import TwinError
from scripts.twin.standin_table import TABLE

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
START, END = "<!-- twin-differences:start (scripts/twin/differences.py) -->", "<!-- twin-differences:end -->"
# The Slurm the twin builds (the tarball ../shared/upstream/slurm holds; tests/twin/test_differences.py checks it).
TWIN_SLURM = "25.11.7"

# What the twin does otherwise than the cluster, beyond the table and the config changes: (what, why).
DEPARTURES: tuple[tuple[str, str], ...] = (
    ("Slurm version", f"the twin builds Slurm {TWIN_SLURM} from source; the images the plan runs are "
                      f"{SERIES['25.11'].patch} (the newest tarball ../shared holds)"),
    ("image base", "each image layer (the stage's files, entrypoints and supervisor configs) lies over this machine's "
                   "Debian root, where Slinky's images have Ubuntu 24.04's packages; the device tools no stage "
                   "installs (fi_info, neuron-ls, nvidia-smi, dcgmi: images.ABSENT_TOOLS) are hidden from every "
                   "image"),
    ("hardware", "a node registers its instance type's CPUs and memory on one socket with every CPU local to every "
                 "GPU (scripts/twin/hardware.py); a p5 has 2 sockets"),
    ("time", "KEDA, the HPA, the NodeSet controller and Karpenter act on the twin's clock, which a test may move on "
             "to let an idle timeout pass; Karpenter's launch takes `launch_delay_s` (its batching window, 10 s, by "
             "default), where EC2's launch and boot add minutes for a GPU instance"),
    ("probes", "the kubelet's probes restart the whole pod (a slurmd pod's other container, the logfile sidecar, "
               "is not run); readiness is recorded and moves no endpoint, as on EKS for slurmd pods: their headless "
               "Service publishes not-ready addresses (scripts/twin/operator/services.py)"),
    ("topology", "no topology agent reaches the twin's nodes (no Kubernetes API, no EC2 instance topology), so no "
                 "node carries a topology annotation and POD_TOPOLOGY stays empty, as for a first pod on a node "
                 "Karpenter has just made on EKS"),
    ("entrypoint", "after Dockerfile.pyxis's `mount -t proc` the twin's slurmd-pyxis entrypoint binds the NVIDIA "
                   "driver's stand-in files back over /proc/driver, where the host's driver shows them on EKS"),
    ("logfile sidecar", "the operator's `logfile` sidecar is not run: the twin reads the daemons' log files"),
    ("ConfigMap updates", "a ConfigMap the test changes (Twin.update_config_map) reaches its pods' volumes at once, "
                          "file by file; the kubelet swaps the whole volume by one symlink within its sync period "
                          "(about a minute), which the identity sidecar's 10 s look absorbs either way"),
    ("Kubernetes API", "none: controllers' API calls fail, as in an outage"),
    ("kubectl", "the change gate's two commands (`get pods -l`, `exec ... -- ARGV`) are answered from the twin's pods "
                "(scripts/twin/kubectl.py), exec running as the container's securityContext user; anything else "
                "is refused"),
    ("DNS", "none: names are in each pod's /etc/hosts"),
    ("identity", "no sssd or LDAP: the identity init container's files"),
    ("replicas", "one login and one restapi pod"),
    ("secrets", "secrets the plan masks are made afresh"),
    ("AWS", "moto's server at an address outside the VPC answers the jobs' S3 calls (scripts/twin/aws.py); for an "
            "RDS stack the database is MariaDB with the twin's CA (scripts/twin/database.py)"),
    ("Trainium jobs", "one worker per node on the CPU (32 torch-xla workers per node do not fit 2 cores)"),
)


def render() -> str:
    """The block between START and END: the stand-ins, the config changes and the other departures."""
    lines = ["| the pod sees | given only where | on EKS | on the twin |", "| --- | --- | --- | --- |"]
    for entry in TABLE:
        gives = ", ".join(f"`{g}`" for g in entry.gives)
        lines.append(f"| {entry.name}: {gives} | {entry.mechanism} | {entry.real} | {entry.twin} |")
    lines += ["", "| differs | how, and why |", "| --- | --- |"]
    for key, (value, why) in {**TWIN_SLURM_CONF, **TWIN_CGROUP_CONF}.items():
        lines.append(f"| `{key}={value}` | {why} |")
    for what, why in DEPARTURES:
        lines.append(f"| {what} | {why} |")
    return "\n".join(lines)


def rewritten(text: str) -> str:
    """`text` (docs/architecture.md) with the block between the markers replaced by render()."""
    try:
        return doc_blocks.rewritten(text, START, END, render(), DOC)
    except doc_blocks.StaleBlockError as exc:
        raise TwinError(str(exc)) from None


def main() -> None:
    """Rewrite docs/architecture.md's block (nothing changes when it is current)."""
    DOC.write_text(rewritten(DOC.read_text()))


if __name__ == "__main__":
    main()
