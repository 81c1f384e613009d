"""The squeue/sacct JSON normalisers on real Slurm 22.05 output and on Slurm 25.11-shaped output.

22.05 samples (tests/slurm/data/*_22.05.json) were captured from the local cluster (`slurm-eks local up`).
25.11 samples (*_25.11.json) are written to the data_parser shapes of SchedMD/slurm
src/plugins/data_parser/v0.0.41/parsers.c (PARSER_ARRAY(JOB_INFO) for squeue, PARSER_ARRAY(JOB) for sacct,
the {set, infinite, number} *_NO_VAL structs and PROCESS_EXIT_CODE); test_fixture_schema.py checks them
against v0.0.44, the data_parser of Slurm 25.11.
"""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime
from pathlib import Path

import pytest

from slurm.jobinfo import (
    JobDataError,
    JobInfo,
    exit_status,
    expand_output_path,
    from_sacct_records,
    jobs_from_sacct,
    jobs_from_squeue,
    number,
    state_name,
)

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def by_id(jobs: list[JobInfo]) -> dict[int, JobInfo]:
    return {job.job_id: job for job in jobs}


def job_in(name: str, job_id: int, /, **fields: object) -> dict:
    """The last record of job `job_id` in data file `name`, with `fields` replaced."""
    record = [job for job in load(name)["jobs"] if job["job_id"] == job_id][-1]
    return {**record, **fields}


UNSET = {"set": False, "infinite": False, "number": 0}


def set_to(number: int) -> dict:
    return {"set": True, "infinite": False, "number": number}


def test_squeue_22_05_states_exit_codes_and_restarts() -> None:
    jobs = by_id(jobs_from_squeue(load("squeue_22.05.json")))
    failed, killed, requeued, running, pending = jobs[9], jobs[17], jobs[16], jobs[18], jobs[19]
    assert (failed.state, failed.exit_code, failed.exit_signal, failed.reason) == ("FAILED", 3, None, "NonZeroExitCode")
    assert (killed.state, killed.exit_code, killed.exit_signal) == ("CANCELLED", 0, 15)
    assert (requeued.state, requeued.restart_count, requeued.finished) == ("COMPLETED", 1, True)
    assert (running.state, running.finished, running.nodes, running.exit_code) == ("RUNNING", False, "vm", None)
    assert running.end_time is None  # squeue's end_time for a live job is only the expected end
    assert (pending.state, pending.reason, pending.start_time, pending.nodes) == ("PENDING", "Resources", None, None)
    assert all(job.user == "root" and job.partition == "cpu" and job.source == "squeue" for job in jobs.values())


def test_squeue_22_05_stdout_paths_are_expanded() -> None:
    jobs = by_id(jobs_from_squeue(load("squeue_22.05.json")))
    assert jobs[8].stdout == "/tmp/capture/ok-8.out"  # -o '/tmp/capture/%x-%j.out'
    assert jobs[9].stdout == "/tmp/capture/slurm-9.out"  # no -o: slurm-%j.out in the work dir
    assert jobs[12].stdout == "/tmp/capture/slurm-11_0.out"  # array task 0 of job 11
    assert jobs[16].stdout == "/tmp/capture/rq-16.out"  # relative -o rq-%j.out


def test_squeue_25_11_lists_and_no_val_numbers() -> None:
    jobs = by_id(jobs_from_squeue(load("squeue_25.11.json")))
    running, requeued, failed, cancelled, array_task = jobs[101], jobs[102], jobs[103], jobs[104], jobs[106]
    assert (running.state, running.nodes, running.user, running.partition) == (
        "RUNNING",
        "gpu-h100-[0-1]",
        "alice",
        "gpu-h100",
    )
    assert running.start_time == datetime.fromtimestamp(1767225610, UTC)
    assert (requeued.state, requeued.reason, requeued.restart_count) == ("PENDING", "BeginTime", 1)
    assert requeued.stdout == "/shared/logs/train-llm-resume-102.out"
    assert (failed.state, failed.exit_code, failed.exit_signal) == ("FAILED", 3, None)
    assert (cancelled.state, cancelled.exit_code, cancelled.exit_signal) == ("CANCELLED", 0, 15)
    assert cancelled.stdout == "/shared/home/alice/slurm-104.out"
    assert array_task.stdout == "/shared/home/alice/runs/slurm-105_1.out"


@pytest.mark.parametrize("order", ["as captured", "reversed"])
def test_sacct_22_05_counts_requeues_and_picks_the_latest_record(order: str) -> None:
    document = load("sacct_22.05.json")
    if order == "reversed":  # the capture lists job 16's requeued record first; a wrong sort must not pass by luck
        document["jobs"].reverse()
    jobs = by_id(jobs_from_sacct(document))
    assert jobs[16].restart_count == 1 and jobs[16].state == "COMPLETED"
    assert jobs[8].restart_count == 0 and jobs[8].state == "COMPLETED" and jobs[8].exit_code == 0
    assert jobs[15].start_time is None and jobs[15].nodes is None  # cancelled while pending
    # 22.05's sacct --json says SUCCESS/0 for a job that exited 3: reported as unknown, not as success.
    assert jobs[9].state == "FAILED" and jobs[9].exit_code is None
    assert jobs[8].stdout is None  # 22.05 accounting keeps no stdout path
    assert all(job.source == "sacct" for job in jobs.values())


def test_sacct_25_11() -> None:
    jobs = by_id(jobs_from_sacct(load("sacct_25.11.json")))
    resumed, failed, cancelled, never_ran = jobs[102], jobs[103], jobs[104], jobs[107]
    assert (resumed.state, resumed.restart_count, resumed.reason) == ("COMPLETED", 1, "BeginTime")
    assert resumed.start_time == datetime.fromtimestamp(1767226150, UTC)
    assert resumed.stdout == "/shared/logs/train-llm-resume-102.out"
    assert (failed.state, failed.exit_code) == ("FAILED", 3)
    assert (cancelled.exit_code, cancelled.exit_signal) == (0, 15)
    assert (never_ran.start_time, never_ran.nodes) == (None, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (7, 7),
        (None, None),
        ({"set": True, "infinite": False, "number": 7}, 7),
        ({"set": False, "infinite": False, "number": 0}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
        # Slurm's own parser (PARSER_ARRAY(UINT64_NO_VAL_STRUCT)) takes a field left out as false
        ({"infinite": False, "number": 7}, None),
        ({"set": True, "number": 7}, 7),
    ],
)
def test_number(value: object, expected: int | None) -> None:
    assert number(value) == expected


def test_state_name_and_exit_status() -> None:
    assert state_name("RUNNING") == state_name(["RUNNING"]) == "RUNNING"
    assert state_name(["PENDING", "REQUEUED"]) == "PENDING"
    assert state_name("cancelled by 1000") == "CANCELLED"  # sacct's text form names who cancelled
    assert exit_status(768) == (3, None)
    assert exit_status(15) == (0, 15)
    assert exit_status(0x80 | 11) == (0, 11)  # 0x80 is the core-dump flag, not part of the signal number
    assert exit_status({"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 9, "name": "Killed"}}) == (
        None,
        9,
    )
    with pytest.raises(JobDataError):
        state_name([])


def test_expand_output_path_patterns() -> None:
    common = {"job_id": 42, "name": "train", "user": "alice", "nodes": "gpu-[3-4]", "work_dir": "/w"}
    assert expand_output_path("%x_%u_%N_%5j_%%.log", **common) == "/w/train_alice_gpu-3_00042_%.log"
    assert expand_output_path("/abs/%j.out", **common) == "/abs/42.out"
    assert expand_output_path(None, **common) == "/w/slurm-42.out"
    array = {**common, "array_job_id": 40, "array_task_id": 2}
    assert expand_output_path("%A-%a-%3a-%j.out", **array) == "/w/40-2-002-42.out"
    assert expand_output_path(None, **array) == "/w/slurm-40_2.out"


def _records(*submissions: int, last_state: str = "COMPLETED") -> list[dict]:
    """sacct records of one requeued job, the newest (last submission) in `last_state`, the rest REQUEUED."""
    newest = max(submissions)
    return [
        {
            "job_id": 5,
            "state": {"current": last_state if at == newest else "REQUEUED", "reason": "None"},
            "time": {"submission": at},
        }
        for at in submissions
    ]


@pytest.mark.parametrize("submissions", [(10, 20, 30), (30, 10, 20), (20, 30, 10)])
def test_sacct_picks_the_newest_record_in_any_order(submissions: tuple[int, ...]) -> None:
    (job,) = jobs_from_sacct({"jobs": _records(*submissions)})
    assert (job.state, job.submit_time, job.restart_count) == ("COMPLETED", datetime.fromtimestamp(30, UTC), 2)


@pytest.mark.parametrize("state", ["OUT_OF_MEMORY", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "DEADLINE", "BOOT_FAIL"])
def test_terminal_states_finish_the_job(state: str) -> None:
    (job,) = jobs_from_sacct({"jobs": _records(1, last_state=state)})
    assert job.finished


@pytest.mark.parametrize("document", [{}, {"jobs": None}, [], {"jobs": [{"name": "no id"}]}])
def test_bad_documents_raise_a_clear_error(document: object) -> None:
    with pytest.raises(JobDataError):
        jobs_from_squeue(document)
    with pytest.raises(JobDataError):
        jobs_from_sacct(document)


def test_a_job_info_is_an_immutable_value() -> None:
    """slurm.client hands JobInfo out: a caller may keep or hash one, so nothing may change it."""
    job = jobs_from_squeue(load("squeue_25.11.json"))[0]
    with pytest.raises(FrozenInstanceError):
        job.state = "COMPLETED"  # type: ignore[misc]


@pytest.mark.parametrize("state", ["", 5])
def test_an_empty_or_non_string_state_is_a_data_error(state: object) -> None:
    with pytest.raises(JobDataError):
        state_name(state)


def test_a_pending_array_record_expands_percent_a_as_slurm_does() -> None:
    """The tasks not started yet share one record with no task id; Slurm expands its %a to NO_VAL."""
    pending = job_in(
        "squeue_25.11.json",
        106,
        job_id=105,
        job_state=["PENDING"],
        nodes="",
        array_task_id=UNSET,
        array_task_string="2-3",
        standard_output="/shared/logs/%x-%A_%a.out",
    )
    (job,) = jobs_from_squeue({"jobs": [pending]})
    assert job.stdout == "/shared/logs/arr-105_4294967294.out"


def test_a_relative_output_path_stays_relative_without_a_work_dir() -> None:
    path = expand_output_path("logs/%x-%j.out", job_id=42, name="train", user="alice", nodes=None, work_dir=None)
    assert path == "logs/train-42.out"


def test_a_job_never_requeued_has_restart_count_zero() -> None:
    assert by_id(jobs_from_squeue(load("squeue_25.11.json")))[101].restart_count == 0


def test_sacct_records_submitted_in_the_same_second_keep_their_order() -> None:
    """A job requeued within the second it was submitted: the record sacct lists last is the newest."""
    requeued, resumed = (record for record in load("sacct_25.11.json")["jobs"] if record["job_id"] == 102)
    same_second = {**requeued, "time": {**requeued["time"], "submission": resumed["time"]["submission"]}}
    (job,) = jobs_from_sacct({"jobs": [same_second, resumed]})
    assert (job.state, job.restart_count) == ("COMPLETED", 1)


@pytest.mark.parametrize(
    "record",
    [
        {"job_id": 7},
        {"job_id": None, "state": {"current": ["COMPLETED"], "reason": "None"}},
        {"job_id": "7.batch", "state": {"current": ["COMPLETED"], "reason": "None"}},
    ],
    ids=["no state", "null id", "step id"],
)
def test_a_sacct_record_without_a_usable_id_or_state_is_a_data_error(record: dict) -> None:
    with pytest.raises(JobDataError, match="sacct job without a usable job_id/state"):
        from_sacct_records([record])


def test_only_a_failed_jobs_zero_exit_code_is_unknown() -> None:
    """The 22.05 workaround is for FAILED alone: a job killed at its time limit ends TIMEOUT 0:0."""
    success = {"status": ["SUCCESS"], "return_code": set_to(0), "signal": {"id": UNSET, "name": ""}}
    timeout = job_in("sacct_25.11.json", 103, state={"current": ["TIMEOUT"], "reason": "None"}, exit_code=success)
    (job,) = jobs_from_sacct({"jobs": [timeout]})
    assert (job.state, job.exit_code, job.exit_signal) == ("TIMEOUT", 0, None)


def test_sacct_a_job_failed_by_a_signal_has_no_return_code() -> None:
    """PROCESS_EXIT_CODE leaves return_code unset for a signalled process."""
    signaled = {"status": ["SIGNALED"], "return_code": UNSET, "signal": {"id": set_to(9), "name": "SIGKILL"}}
    (job,) = jobs_from_sacct({"jobs": [job_in("sacct_25.11.json", 103, exit_code=signaled)]})
    assert (job.state, job.exit_code, job.exit_signal) == ("FAILED", None, 9)


def test_sacct_keeps_the_job_name() -> None:
    jobs = by_id(jobs_from_sacct(load("sacct_25.11.json")))
    assert (jobs[102].name, jobs[103].name) == ("train-llm-resume", "bad-config")


@pytest.mark.parametrize(
    ("pattern", "expanded"),
    [
        ("/shared/logs/%x-%%j.out", "/shared/logs/bad-config-%j.out"),  # %% is a literal %
        ("/shared/logs/%x-%j.%s.out", "/shared/logs/bad-config-103.batch.out"),  # %s: the batch step
    ],
)
def test_sacct_stdout_is_slurms_own_expansion(pattern: str, expanded: str) -> None:
    """24.05+ sacct prints the -o pattern and Slurm's expansion of it; the expansion is final."""
    record = job_in("sacct_25.11.json", 103, stdout=pattern, stdout_expanded=expanded)
    (job,) = jobs_from_sacct({"jobs": [record]})
    assert job.stdout == expanded
