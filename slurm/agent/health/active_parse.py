"""Read the bus bandwidth (GB/s) out of a collective benchmark's output: nccl-tests' all_reduce_perf on GPUs,
nccom-test on Trainium. None means the run did not finish cleanly (no table, a truncated table, wrong results,
a failure line): the caller reports that node as an error and never drains it on this number.

The number is the bus bandwidth of the largest message size, the out-of-place column for nccl-tests. Not the
summary's "Avg bus bandwidth": that is the mean over every size of the sweep (nccl-tests v2.16.4
src/common.cu: `bw[0] /= bw_count[0]`; nccom-test.rst: "Average of the values in the busbw column"), so it
depends on -b/-e and is dragged down by the small, latency-bound sizes (0.00 GB/s rows). nccl-tests'
doc/PERFORMANCE.md: "on large sizes, it makes more sense to look at the bandwidth", and busbw is the number to
"compare ... with the hardware peak bandwidth, independently of the number of ranks used".

Standard library only: this runs in the cluster.
"""

from __future__ import annotations

import math
import re

# Line prefixes a launcher adds: OpenMPI's --tag-output `[1,0]<stdout>:` (the sample in awsome-distributed-
# training v1.2.0 micro-benchmarks/nccl-tests/aws-batch/README.md) and srun --label `0: ` (the samples in
# micro-benchmarks/nccl-tests/README.md there). Table rows start with spaces, never `<digits>:`.
_LAUNCHER_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+: )")
# nccl-tests v2.16.4 src/common.cu (the version in the pinned image, active.NCCL_TESTS_IMAGE) prints after the
# table `# Out of bounds values : %d %s` (OK or FAILED) and `# Avg bus bandwidth    : %g`; v2.19.6
# src/util.cu prints the same words padded by `# %-20s : `. Their presence says the sweep finished.
_NCCL_ERRORS = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<count>\d+)\s*(?P<verdict>\w*)")
_NCCL_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*\S+")
# nccom-test (aws-neuron-sdk v2.27.1 tools/neuron-sys-tools/nccom-test.rst): `Avg bus bandwidth:      40.6901GB/s`
# after a finished sweep; `<n> errors found - test failed` after a failed one.
_NEURON_AVG = re.compile(r"^\s*Avg bus bandwidth:\s*\S+")
_NEURON_FAILED = re.compile(r"\berrors? found\b|\btest failed\b|\bFailure\b")


def _lines(text: str) -> list[str]:
    return [_LAUNCHER_PREFIX.sub("", line, count=1).rstrip() for line in text.splitlines()]


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _largest(rows: list[tuple[int, float]]) -> float | None:
    return max(rows)[1] if rows else None


def nccl_bus_bandwidth(text: str) -> float | None:
    """Out-of-place busbw (GB/s) of the largest size all_reduce_perf ran, or None if the run did not finish
    with every result correct."""
    lines = _lines(text)
    # The header row, e.g. `#       size         count      type   redop    root     time   algbw   busbw #wrong
    # time ...` (v2.16.4 common.cu): the first busbw is out-of-place, the column after it #wrong.
    header = next((line.lstrip("#").split() for line in lines
                   if line.startswith("#") and line.lstrip("#").split()[:1] == ["size"] and "busbw" in line), None)
    if header is None:
        return None
    busbw, wrong = header.index("busbw"), header.index("busbw") + 1
    errors = [m for line in lines if (m := _NCCL_ERRORS.match(line))]
    if not errors or any(m["count"] != "0" or m["verdict"] not in ("", "OK") for m in errors):
        return None
    if not any(_NCCL_AVG.match(line) for line in lines):
        return None
    rows: list[tuple[int, float]] = []
    for line in lines:
        tokens = line.split()
        if line.startswith("#") or len(tokens) < len(header) or not tokens[0].isdigit():
            continue  # comments, NCCL's own log lines, a row cut short
        value = _number(tokens[busbw])
        if value is None:
            return None
        if tokens[wrong] not in ("0", "N/A"):  # "N/A" when run with -c 0 (no check)
            return None
        rows.append((int(tokens[0]), value))
    return _largest(rows)


def neuron_bus_bandwidth(text: str) -> float | None:
    """busbw (GB/s) of the largest size nccom-test ran, or None if it failed or did not finish."""
    lines = _lines(text)
    if any(_NEURON_FAILED.search(line) for line in lines):
        return None
    # `size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)` (--stats and --show-algorithm
    # add columns: find busbw by name).
    header = next((line.split() for line in lines if line.split()[:1] == ["size(B)"] and "busbw(GB/s)" in line),
                  None)
    if header is None or not any(_NEURON_AVG.match(line) for line in lines):
        return None
    busbw = header.index("busbw(GB/s)")
    rows: list[tuple[int, float]] = []
    for line in lines:
        tokens = line.split()
        if len(tokens) != len(header) or not tokens[0].isdigit():
            continue
        value = _number(tokens[busbw])
        if value is None:
            return None
        rows.append((int(tokens[0]), value))
    return _largest(rows)
