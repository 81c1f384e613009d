"""The hand-written Slurm 25.11 fixtures (data/*_25.11.json) hold to Slurm 25.11's own data_parser schema.

data/data_parser_v0.0.44.json holds the facts taken from SchedMD/slurm (its "source" says where): the
top-level field names sacct/squeue dump, and the parser type of every field slurm/jobinfo.py reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data"
SCHEMA = json.loads((DATA / "data_parser_v0.0.44.json").read_text())


def _no_val(value: Any) -> bool:
    """*_NO_VAL numbers dump as {set, infinite, number} (DUMP_FUNC(UINT32_NO_VAL) and friends)."""
    return (
        isinstance(value, Mapping)
        and set(value) == {"set", "infinite", "number"}
        and isinstance(value["set"], bool)
        and isinstance(value["infinite"], bool)
        and isinstance(value["number"], int)
    )


def _plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flags(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(flag, str) for flag in value)


def _exit_code(value: Any) -> bool:
    """PROCESS_EXIT_CODE dumps PARSER_ARRAY(PROCESS_EXIT_CODE_VERBOSE): status flags, return code, signal."""
    return (
        isinstance(value, Mapping)
        and _flags(value.get("status"))
        and _no_val(value.get("return_code"))
        and _no_val(value.get("signal", {}).get("id"))
        and isinstance(value["signal"].get("name"), str)
    )


SHAPES: dict[str, Callable[[Any], bool]] = {
    "STRING": lambda value: isinstance(value, str),
    "JOB_REASON": lambda value: isinstance(value, str),
    "USER_ID": lambda value: isinstance(value, str),  # user_name overload: the name, not the uid
    "JOB_USER": lambda value: isinstance(value, str),
    "JOB_STDOUT": lambda value: isinstance(value, str),
    "UINT16": _plain_int,
    "UINT32": _plain_int,
    "TIMESTAMP": _plain_int,  # dumped as UINT64
    "UINT32_NO_VAL": _no_val,
    "TIMESTAMP_NO_VAL": _no_val,  # dumped as UINT64_NO_VAL
    "JOB_STATE": _flags,
    "PROCESS_EXIT_CODE": _exit_code,
}


def _at(job: Mapping[str, Any], path: str) -> Any:
    for part in path.split("/"):
        job = job[part]
    return job


@pytest.mark.parametrize("document", ["sacct", "squeue"])
def test_fixture_field_names_are_slurm_25_11_names(document: str) -> None:
    known = set(SCHEMA[document]["fields"])
    for job in json.loads((DATA / f"{document}_25.11.json").read_text())["jobs"]:
        assert set(job) <= known, f"job {job.get('job_id')}: not in {SCHEMA[document]['parser']}: {set(job) - known}"


@pytest.mark.parametrize("document", ["sacct", "squeue"])
def test_fixture_values_have_slurm_25_11_shapes(document: str) -> None:
    read = SCHEMA[document]["read"]
    assert set(read.values()) <= set(SHAPES), "a field type without a shape check"
    for job in json.loads((DATA / f"{document}_25.11.json").read_text())["jobs"]:
        for path, kind in read.items():
            value = _at(job, path)
            assert SHAPES[kind](value), f"job {job['job_id']}: {path} is {value!r}, not a {kind}"


def test_the_shape_checks_can_fail() -> None:
    """A 22.05-shaped record (plain state string, raw wait status) must not pass as 25.11."""
    assert not SHAPES["JOB_STATE"]("RUNNING")
    assert not SHAPES["PROCESS_EXIT_CODE"](768)
    assert not SHAPES["TIMESTAMP_NO_VAL"](1767225600)
    assert not SHAPES["TIMESTAMP"]({"set": True, "infinite": False, "number": 1767225600})
