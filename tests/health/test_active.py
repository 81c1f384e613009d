"""Active checks: parsers, verdict, targets and job scripts (slurm/agent/health/active.py, active_parse.py).

Samples in data/, copied from upstream (launcher prefixes and spacing kept; rst block indentation removed):
- nccl-all_reduce_perf.txt: aws-samples/awsome-distributed-training v1.2.0 micro-benchmarks/nccl-tests/
  aws-batch/README.md, step 4 (all_reduce_perf on p5.48xlarge under mpirun --tag-output, full table + summary).
- nccl-all_reduce_perf-excerpt.txt: same tag, micro-benchmarks/nccl-tests/README.md "Results", 2x p5.48xlarge
  (srun --label prefixes; the README shows the table only, without the summary lines).
- nccom-test-allr.txt: aws-neuron/aws-neuron-sdk v2.27.1 tools/neuron-sys-tools/nccom-test.rst, "2 rank
  all-reduce on a single instance for sizes ranging from 1MiB to 1GiB" (output, without the command line).
- nccom-test-failed.txt: same page, "After a benchmark attempt" (a failed run).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.config.slinky_releases import pinning_problem
from components.slinky.images import TRAINING_IMAGES
from jobs.render import enroot_uri
from slurm.agent.health import active
from slurm.agent.health.active import (
    NCCL_TESTS_IMAGE,
    NEURON_IMAGE,
    judge,
    nccl_bus_bandwidth,
    nccl_script,
    neuron_bus_bandwidth,
    neuron_script,
    probe_targets,
    pyxis_image,
    threshold,
)
from slurm.agent.health.reasons import parse_reason

DATA = Path(__file__).parent / "data"
STAND_IN = Path(__file__).parent / "stand_ins" / "all_reduce_perf"
NCCL_SAMPLE = (DATA / "nccl-all_reduce_perf.txt").read_text()
NCCOM_SAMPLE = (DATA / "nccom-test-allr.txt").read_text()


# --- parsers -------------------------------------------------------------------------------------------------

def test_nccl_reads_the_largest_size_out_of_place_busbw_of_the_real_sample() -> None:
    # Last row: 17179869184 ... 62239  276.03  483.05  0 | 62200  276.20  483.35  0; Avg bus bandwidth 156.742.
    assert nccl_bus_bandwidth(NCCL_SAMPLE) == 483.05


def test_nccl_without_the_summary_is_none() -> None:
    """A table cut off before `# Out of bounds values` / `# Avg bus bandwidth` (time limit, crash) may stop
    at a small size: its last busbw says nothing about the node."""
    assert nccl_bus_bandwidth((DATA / "nccl-all_reduce_perf-excerpt.txt").read_text()) is None
    cut = NCCL_SAMPLE.splitlines()
    assert nccl_bus_bandwidth("\n".join(cut[:20])) is None
    assert nccl_bus_bandwidth("\n".join(line for line in cut if "Avg bus bandwidth" not in line)) is None


def test_nccl_wrong_results_are_none() -> None:
    failed = NCCL_SAMPLE.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED")
    assert nccl_bus_bandwidth(failed) is None
    last = NCCL_SAMPLE.splitlines()[-3]
    wrong = NCCL_SAMPLE.replace(last, last.replace("483.05      0", "483.05      7"))
    assert wrong != NCCL_SAMPLE and nccl_bus_bandwidth(wrong) is None


@pytest.mark.parametrize("text", ["", "garbage\n", "srun: error: task 0 launch failed\n",
                                  "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 10\n"])
def test_nccl_garbage_is_none(text: str) -> None:
    assert nccl_bus_bandwidth(text) is None


def test_nccl_ignores_interleaved_log_lines() -> None:
    lines = NCCL_SAMPLE.splitlines()
    noisy = [*lines[:10], "ip-10-1-2-3:1234:1234 [0] NCCL WARN NET/OFI something", *lines[10:]]
    assert nccl_bus_bandwidth("\n".join(noisy)) == 483.05


def test_neuron_reads_the_largest_size_busbw_of_the_real_sample() -> None:
    # Last row: 1073741824  268435456  fp32  18930  52.83  52.83; Avg bus bandwidth 23.6671GB/s.
    assert neuron_bus_bandwidth(NCCOM_SAMPLE) == 52.83


def test_neuron_failed_run_is_none() -> None:
    assert neuron_bus_bandwidth((DATA / "nccom-test-failed.txt").read_text()) is None


@pytest.mark.parametrize("text", ["", "garbage\n",
                                  "Neuron DKMS Driver is not running! Read the troubleshooting guide\n"])
def test_neuron_garbage_is_none(text: str) -> None:
    assert neuron_bus_bandwidth(text) is None


def test_neuron_without_the_summary_is_none() -> None:
    lines = NCCOM_SAMPLE.splitlines()
    assert neuron_bus_bandwidth("\n".join(lines[:-1])) is None  # no `Avg bus bandwidth:` line
    assert neuron_bus_bandwidth("\n".join(lines[1:])) is None  # no header


# --- the stand-in --------------------------------------------------------------------------------------------

def _stand_in(*args: str, **env: str) -> str:
    result = subprocess.run([str(STAND_IN), *args], capture_output=True, text=True, check=True, timeout=30,
                            env={"PATH": os.environ["PATH"], "SLURM_NTASKS": "8", **env})
    return result.stdout


def test_stand_in_is_read_like_the_real_sample() -> None:
    """Same sweep as the sample (8 B to 16 GiB), its busbw set to the sample's: the same number comes out,
    and the header lines have the sample's columns."""
    out = _stand_in("-b", "8", "-e", "16G", "-f", "2", "-g", "1", STAND_IN_BUSBW="483.05")
    assert nccl_bus_bandwidth(out) == nccl_bus_bandwidth(NCCL_SAMPLE) == 483.05

    def headers(text: str) -> list[list[str]]:
        return [line.split(":", 1)[-1].split() for line in text.splitlines()
                if "busbw" in line or "out-of-place" in line or "(elements)" in line]

    assert headers(out) == headers(NCCL_SAMPLE)
    sizes = [line.split()[0] for line in out.splitlines() if line.strip()[:1].isdigit()]
    sample_sizes = [line.split(":", 1)[1].split()[0] for line in NCCL_SAMPLE.splitlines()
                    if line.split(":", 1)[1].strip()[:1].isdigit()]
    assert sizes == sample_sizes


def test_stand_in_slow_and_failed() -> None:
    assert nccl_bus_bandwidth(_stand_in("-b", "8M", "-e", "2G", "-f", "2", STAND_IN_BUSBW="12.5")) == 12.5
    assert nccl_bus_bandwidth(_stand_in("-b", "8M", "-e", "2G", "-f", "2", STAND_IN_FAIL="1")) is None
    assert nccl_bus_bandwidth(_stand_in("-b", "8M", "-e", "2G", "-f", "2", SLURM_PROCID="3")) is None  # silent


# --- judge ---------------------------------------------------------------------------------------------------

def test_slow_node_is_drained_with_its_number_in_the_reason() -> None:
    results = {"gpu-0": 480.0, "gpu-1": 478.0, "gpu-2": 120.4, "gpu-3": 481.0}
    drained = judge(results, None, 0.8)
    assert [node for node, _ in drained] == ["gpu-2"]
    reason = parse_reason(drained[0][1])
    assert reason is not None and reason.check == "nccl"
    assert "bus bandwidth 120.4 GB/s below 383.2 GB/s" in reason.detail  # 0.8 x median 479.0
    assert "median 479.0 GB/s of 4 nodes" in reason.detail


def test_two_nodes_and_no_floor_drain_nothing() -> None:
    assert judge({"gpu-0": 480.0, "gpu-1": 10.0}, None, 0.8) == []
    assert judge({}, None, 0.8) == []


def test_floor_applies_with_few_nodes_and_wins_when_higher() -> None:
    drained = judge({"gpu-0": 480.0, "gpu-1": 300.0}, 350.0, 0.8)
    assert [node for node, _ in drained] == ["gpu-1"]
    assert "below 350.0 GB/s (the configured floor)" in drained[0][1]
    # Median 400 x 0.5 = 200 < floor 380: the floor is the threshold.
    drained = judge({"a": 400.0, "b": 400.0, "c": 370.0}, 380.0, 0.5, check="neuron")
    assert drained == [("c", "slurm-eks: neuron: bus bandwidth 370.0 GB/s below 380.0 GB/s (the configured floor)")]


def test_median_wins_when_higher_than_the_floor() -> None:
    drained = judge({"a": 400.0, "b": 400.0, "c": 300.0}, 100.0, 0.9)
    assert [node for node, _ in drained] == ["c"]
    assert "below 360.0 GB/s (90% of the median 400.0 GB/s of 3 nodes)" in drained[0][1]


def test_node_at_the_threshold_is_kept_and_bad_fraction_refused() -> None:
    assert judge({"a": 100.0, "b": 100.0, "c": 80.0}, None, 0.8) == []
    with pytest.raises(ValueError):
        judge({"a": 1.0}, None, 0.0)


# --- targets -------------------------------------------------------------------------------------------------

NODES = [
    ("idle-new", frozenset({"IDLE"}), 0),
    ("idle-old", frozenset({"IDLE", "DYNAMIC_NORM"}), 0),
    ("idle-recent", frozenset({"IDLE"}), 0),
    ("drained", frozenset({"IDLE", "DRAIN"}), 0),
    ("draining", frozenset({"MIXED", "DRAIN"}), 4),
    ("busy", frozenset({"ALLOCATED"}), 96),
    ("completing", frozenset({"IDLE", "COMPLETING"}), 0),
    ("planned", frozenset({"IDLE", "PLANNED"}), 0),
    ("alloc-cpus", frozenset({"IDLE"}), 2),
    ("down", frozenset({"DOWN"}), 0),
]


def test_targets_are_idle_undrained_unallocated_and_due() -> None:
    last = {"idle-old": 1000.0, "idle-recent": 9500.0}
    assert probe_targets(NODES, last, now=10000.0, interval_s=3600, limit=10) == ["idle-new", "idle-old"]


def test_targets_are_capped_oldest_first() -> None:
    nodes = [(f"n{i}", frozenset({"IDLE"}), 0) for i in range(5)]
    last = {"n0": 500.0, "n1": 100.0, "n2": 300.0}
    assert probe_targets(nodes, last, now=10000.0, interval_s=60, limit=2) == ["n3", "n4"]  # never probed first
    assert probe_targets(nodes, {f"n{i}": float(i) for i in range(5)}, 10000.0, 60, 2) == ["n0", "n1"]
    assert probe_targets(nodes, {}, 10000.0, 60, 0) == []


# --- scripts and images --------------------------------------------------------------------------------------

def _bash_n(script: str, tmp_path: Path) -> None:
    path = tmp_path / "check.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_nccl_script(tmp_path: Path) -> None:
    script = nccl_script(8, NCCL_TESTS_IMAGE, "/shared/logs/active-checks/")
    _bash_n(script, tmp_path)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in ("--exclusive", "--nodes=1", "--ntasks-per-node=8", "--gpus-per-node=8", "--time=00:10:00",
                      "--output=/shared/logs/active-checks/%j.out"):
        assert f"#SBATCH {directive}" in lines
    srun = lines[-1]
    assert srun.startswith("srun --mpi=pmix ")
    # pyxis' REGISTRY#IMAGE form, quoted for bash.
    assert "--container-image='public.ecr.aws#hpc-cloud/nccl-tests:cuda12.8.1-efa1.42.0-ofiv1.16.0-" in srun
    assert srun.endswith("/opt/nccl-tests/build/all_reduce_perf -b 8M -e 2G -f 2 -g 1")


def test_nccl_script_on_the_host_and_bad_input(tmp_path: Path) -> None:
    script = nccl_script(2, None, "/tmp/out", binary=str(STAND_IN), mpi="none")
    _bash_n(script, tmp_path)
    assert "--container-image" not in script and f"srun --mpi=none --cpu-bind=none {STAND_IN} -b 8M" in script
    with pytest.raises(ValueError):
        nccl_script(0, NCCL_TESTS_IMAGE, "/tmp")


def test_neuron_script(tmp_path: Path) -> None:
    script = neuron_script(32, NEURON_IMAGE, "/shared/logs/active-checks")
    _bash_n(script, tmp_path)
    lines = script.splitlines()
    for directive in ("--exclusive", "--nodes=1", "--ntasks-per-node=1", "--output=/shared/logs/active-checks/%j.out"):
        assert f"#SBATCH {directive}" in lines
    assert not any("--gpus-per-node" in line for line in lines)
    assert lines[-1] == ("srun --container-image='public.ecr.aws#neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-"
                         "sdk2.27.1-ubuntu24.04' nccom-test -r 32 --nnodes 1 --minbytes 1MB --maxbytes 1GB "
                         "--stepfactor 4 --datatype fp32 --non-interactive allr")
    with pytest.raises(ValueError):
        neuron_script(1, NEURON_IMAGE, "/tmp")


def test_images_are_pinned_and_the_neuron_one_is_the_training_default() -> None:
    assert pinning_problem(NCCL_TESTS_IMAGE) is None
    assert pinning_problem(NEURON_IMAGE) is None
    assert TRAINING_IMAGES["neuron"] == NEURON_IMAGE


@pytest.mark.parametrize("ref", [NCCL_TESTS_IMAGE, NEURON_IMAGE, "nvcr.io/nvidia/pytorch:24.01-py3",
                                 "ubuntu:24.04", "library/ubuntu:24.04", "localhost/x:1", "host:5000/a/b:1",
                                 "nvcr.io#nvidia/pytorch:24.01-py3"])
def test_pyxis_image_follows_the_enroot_rule(ref: str) -> None:
    assert f"docker://{pyxis_image(ref)}" == enroot_uri(ref)


def test_pyxis_image_keeps_a_squashfs_path() -> None:
    assert pyxis_image("/shared/images/nccl.sqsh") == "/shared/images/nccl.sqsh"


def test_standard_library_only() -> None:
    import ast
    import sys

    for module in (active, __import__("slurm.agent.health.active_parse", fromlist=["x"])):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or name.startswith("slurm.agent.health") \
                    or top == "__future__", name


def test_boundaries_of_the_scripts_the_threshold_and_the_targets() -> None:
    """Each limit at its edge: one GPU and two NeuronCores are enough; a fraction of exactly 1 is allowed; a
    node probed exactly `interval` ago is due; a node in every probe state is probed; a partition already over
    its probes gets none; a name sorting after "localhost" without a dot is no registry; an upper-case one is."""
    assert "--ntasks-per-node=1" in nccl_script(1, NCCL_TESTS_IMAGE, "/tmp")
    assert "-r 2 " in neuron_script(2, NEURON_IMAGE, "/tmp")
    assert threshold({"a": 100.0, "b": 100.0, "c": 100.0}, None, 1.0) is not None
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError):
            threshold({"a": 1.0}, None, bad)
    every = [("n0", {"IDLE", "DYNAMIC_NORM", "CLOUD"}, 0)]
    assert probe_targets(every, {"n0": 0.0}, 100.0, 100.0, 1) == ["n0"]
    assert probe_targets(every, {}, 100.0, 100.0, -1) == []
    assert pyxis_image("nvidia/cuda:12.8.1") == "nvidia/cuda:12.8.1"
    assert pyxis_image("MyRegistry/team/image:1") == "MyRegistry#team/image:1"
