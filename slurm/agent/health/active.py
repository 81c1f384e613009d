"""Active checks: a one-node collective bandwidth test, run as a Slurm job on idle nodes, and the judgement
that drains the slow ones. The pure parts: which nodes to probe, the job scripts, the verdict. Parsing the
output is in active_parse.py; talking to Slurm is the caller's (slurm_access.py).

Standard library only: this runs in the cluster.
"""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Collection, Iterable, Mapping

from slurm.agent.health.active_parse import nccl_bus_bandwidth, neuron_bus_bandwidth
from slurm.agent.health.reasons import drain_reason

__all__ = ["NCCL_TESTS_IMAGE", "NEURON_IMAGE", "judge", "nccl_bus_bandwidth", "nccl_script", "neuron_bus_bandwidth",
           "neuron_script", "probe_targets", "pyxis_image", "threshold"]

# nccl-tests built with MPI=1 against NCCL, aws-ofi-nccl and the EFA installer, from AWS's recipe
# (aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/nccl-tests.Dockerfile). The tag is the
# one its buildspec.yaml (commit 0c8089b7) computes for those versions,
# `cuda${CUDA}-efa${EFA}-ofi${OFI}-nccl${NCCL}-tests${TESTS}`, and the one 1.architectures/3.aws-batch/
# aws-batch-distributed-training-p6.yaml (commit 0308ff26, still at 7217859f) runs; the other references there
# are `:latest`. That the tag is still on public.ecr.aws could not be checked offline.
NCCL_TESTS_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.42.0-ofiv1.16.0-ncclv2.27.5-1-testsv2.16.4"
# The Dockerfile builds nccl-tests in /opt/nccl-tests and puts build/ on no PATH (nccl-tests.Dockerfile at
# 0c8089b7; slurm/nccl-tests-container.sbatch calls it by this path too).
NCCL_TESTS_BIN = "/opt/nccl-tests/build/all_reduce_perf"
# The Neuron PyTorch training DLC, the default Trainium training image (components/slinky/images.py
# TRAINING_IMAGES; a test holds the two equal): aws-neuron/deep-learning-containers 2.27.1 README lists it with
# aws-neuronx-tools, and pytorch/training/2.9.0/Dockerfile.neuronx installs aws-neuronx-tools=2.27.33.0 (which
# holds nccom-test) with /opt/aws/neuron/bin on PATH.
NEURON_IMAGE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04"

# A few minutes is plenty: one node, one sweep. A check that hangs must not hold an idle node for long.
TIME_LIMIT = "00:10:00"
# all_reduce_perf sizes (nccl-tests v2.16.4 README, "Arguments"): 8 MiB to 2 GiB doubling (-b/-e/-f); one GPU
# per process (-g 1), one process per GPU (the README's `mpirun -np 64 -N 8 ... -g 1`). Large sizes only: the
# verdict reads the largest (active_parse.py), the small ones only cost time.
NCCL_ARGS = ("-b", "8M", "-e", "2G", "-f", "2", "-g", "1")
# nccom-test (aws-neuron-sdk v2.27.1 tools/neuron-sys-tools/nccom-test.rst): all-reduce (`allr`) over `-r` ranks
# on `-N 1` node, 1 MiB to 1 GiB stepping x4 in fp32 as its single-instance example, and --non-interactive
# ("Do not display any animation or progress indicator") since the output goes to a file.
NEURON_ARGS = ("--nnodes", "1", "--minbytes", "1MB", "--maxbytes", "1GB", "--stepfactor", "4",
               "--datatype", "fp32", "--non-interactive")
# States a node may be in and still be probed: idle, and nothing else Slurm or a person has planned for it
# (the v0.0.44 node state enum, schema `v0.0.44_node` in the OpenAPI description slurmrestd 25.11 generates, also
# has DRAIN, COMPLETING, RESERVED, PLANNED, MAINTENANCE, POWER*, REBOOT_*, NOT_RESPONDING, ...). DYNAMIC_NORM:
# Slinky's slurmd pods register as dynamic nodes; CLOUD: a powered-up cloud node.
PROBE_STATES = frozenset({"IDLE", "DYNAMIC_NORM", "CLOUD"})
# The median of fewer nodes says little about what a healthy node does: with fewer, only a floor drains.
MIN_NODES_FOR_MEDIAN = 3


def pyxis_image(reference: str) -> str:
    """A Docker reference as pyxis' --container-image takes it, `[REGISTRY#]IMAGE[:TAG]` (NVIDIA/pyxis v0.24.0
    README); a squashfs path is kept. The registry rule is jobs/render.py enroot_uri's (a test holds them equal):
    the first path part is a registry when it has '.' or ':', is 'localhost', or is not lower case."""
    ref = reference.removeprefix("docker://")
    first, slash, rest = ref.partition("/")
    is_registry = first == "localhost" or any(c in first for c in ".:") or first != first.lower()
    if ref.startswith(("/", ".")) or "#" in ref or not slash or not is_registry:
        return ref
    return f"{first}#{rest}"


def _header(what: str, ntasks: int, output_dir: str, gpus: int | None) -> list[str]:
    lines = ["#!/bin/bash", f"# slurm-eks active check: {what}. Rendered by slurm/agent/health/active.py.",
             "#SBATCH --nodes=1", f"#SBATCH --ntasks-per-node={ntasks}"]
    if gpus is not None:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    return [*lines, "#SBATCH --exclusive", f"#SBATCH --time={TIME_LIMIT}",
            f"#SBATCH --output={output_dir.rstrip('/')}/%j.out", "set -uo pipefail"]


def nccl_script(partition_gpus: int, image: str | None, output_dir: str, *,
                binary: str = NCCL_TESTS_BIN, mpi: str = "pmix") -> str:
    """sbatch script: all_reduce_perf over every GPU of one node, one MPI rank per GPU. One node's GPUs talk over
    NVLink/NVSwitch, so none of the EFA/NCCL network settings of the sbatch templates apply (a multi-node probe
    would need them: jobs/templates/nvidia.sbatch.j2's environment block). image=None runs `binary` on the
    host (the local cluster runs tests/health/stand_ins/all_reduce_perf so)."""
    if partition_gpus < 1:
        raise ValueError(f"partition_gpus must be >= 1, not {partition_gpus}")
    lines = _header(f"nccl-tests all_reduce_perf over {partition_gpus} GPUs", partition_gpus, output_dir,
                    partition_gpus)
    # --mpi=pmix: the binary is built with MPI=1, so srun's tasks must form one MPI world (as the recipe's
    # slurm/nccl-tests-container.sbatch runs it); Slurm's Debian packages, which Slinky's images install, are
    # built --with-pmix (SchedMD/slurm slurm-25-11-6-1 debian/rules). Only rank 0 prints (common.h PRINT).
    container = [f"--container-image={shlex.quote(pyxis_image(image))}"] if image else []
    lines.append(" ".join(["srun", f"--mpi={mpi}", "--cpu-bind=none", *container, shlex.quote(binary), *NCCL_ARGS]))
    return "\n".join(lines) + "\n"


def neuron_script(cores: int, image: str, output_dir: str) -> str:
    """sbatch script: nccom-test all-reduce over the `cores` NeuronCores of one Trainium node. nccom-test
    starts its own ranks on the node (one neuron-bench process), so the step is one task."""
    if cores < 2:
        raise ValueError(f"an all-reduce needs at least 2 NeuronCores, not {cores}")
    lines = _header(f"nccom-test all-reduce over {cores} NeuronCores", 1, output_dir, None)
    lines.append(" ".join(["srun", f"--container-image={shlex.quote(pyxis_image(image))}",
                           "nccom-test", "-r", str(cores), *NEURON_ARGS, "allr"]))
    return "\n".join(lines) + "\n"


def threshold(results: Mapping[str, float], floor_gbps: float | None, fraction: float) -> tuple[float, str] | None:
    """The bandwidth below which a node is drained, and how it was reached; None when nothing may be drained."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], not {fraction}")
    candidates: list[tuple[float, str]] = []
    if floor_gbps is not None:
        candidates.append((floor_gbps, "the configured floor"))
    if len(results) >= MIN_NODES_FOR_MEDIAN:
        median = statistics.median(results.values())
        why = f"{fraction:.0%} of the median {median:.1f} GB/s of {len(results)} nodes"
        candidates.append((fraction * median, why))
    return max(candidates) if candidates else None


def judge(results: Mapping[str, float], floor_gbps: float | None, fraction: float,
          check: str = "nccl") -> list[tuple[str, str]]:
    """(node, drain reason) for each node measured below the threshold: the larger of the floor (when set) and
    `fraction` x this round's median (when at least MIN_NODES_FOR_MEDIAN nodes were measured). `check` is
    "nccl" or "neuron", the reason's check name."""
    limit = threshold(results, floor_gbps, fraction)
    if limit is None:
        return []
    value, why = limit
    return [(node, drain_reason(check, f"bus bandwidth {gbps:.1f} GB/s below {value:.1f} GB/s ({why})"))
            for node, gbps in sorted(results.items()) if gbps < value]


def probe_targets(nodes: Iterable[tuple[str, Collection[str], int]], last_probed: Mapping[str, float], now: float,
                  interval_s: float, limit: int) -> list[str]:
    """Nodes to probe this round, at most `limit` (so checks never take a whole partition), least recently
    probed first: idle with no other state flag (PROBE_STATES), no CPUs allocated, not probed in `interval_s`.
    `nodes` holds (name, upper-case states, allocated CPUs)."""
    due = [(last_probed.get(name, float("-inf")), name) for name, states, alloc_cpus in nodes
           if "IDLE" in states and set(states) <= PROBE_STATES and alloc_cpus == 0
           and now - last_probed.get(name, float("-inf")) >= interval_s]
    return [name for _, name in sorted(due)[:max(limit, 0)]]
