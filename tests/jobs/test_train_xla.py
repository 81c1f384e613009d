"""jobs/train.py on the torch-xla path (`--device xla`, what the Neuron job script selects) under real torchrun,
with torch-xla 2.9.0 on the CPU (PJRT_DEVICE=CPU) from its own venv (`make xla-venv`; torch-xla pairs with an
older torch than the main venv's).

Tested here: the xla process group, the XLA device, the graph cut per step, gradient reduction and optimizer
step, bf16 autocast, XLA checkpoints (xm.save), stop -> checkpoint -> PREEMPTED, a killed run resumed from the
newest complete checkpoint ending bit for bit where an uninterrupted run ends, the graph-extraction mode that
neuron_parallel_compile uses, and the refusal to train on several CPU processes.

Not tested without Neuron hardware: collectives across replicas. torch-xla's CPU client cannot reduce across
processes (measured: with `xla://` each of 2 torchrun workers forms a world of one; with `env://` a world of 2
whose all_reduce returns each rank's own values; hence the refusal), and
replicas as threads of one process (xmp.spawn, CPU_NUM_DEVICES=2) reduce a scalar correctly but deadlock on a
training step here: the threads compile separately and reach XLA's CPU rendezvous (10 s termination timeout)
with mismatched op ids or too late. So xm.reduce_gradients over several NeuronCores, NEURON_RT_VISIBLE_CORES
per process, the Neuron compiler and neuron_parallel_compile itself run first on a trn1 node.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.config.stackfile import load_stack
from jobs.render import render_job, target_for_partition
from tests.conftest import REPO, unavailable
from tests.jobs import runs
from tests.jobs.runs import Run, complete_steps, once_at_step, stop_file
from tests.render.standins import job_sandbox, last_event, run_script

pytestmark = pytest.mark.torch

STEPS, EVERY = 8, 5  # the stop lands between periodic checkpoints (the XLA RNG regression)
FLAGS = ["--device", "xla", "--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--warmup-steps", "2"]


@pytest.fixture(scope="module")
def xla_python() -> str:
    python = Path(os.environ.get("SLURM_EKS_XLA_VENV", REPO / ".venv-xla")) / "bin" / "python"
    if not python.is_file():
        unavailable(f"{python} is missing: `make xla-venv` builds the torch-xla venv (make test does)")
    return str(python)


@pytest.fixture(scope="module")
def xla_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    # One persistent compilation cache for the module: only the first run pays for compiling the graphs.
    cache = tmp_path_factory.mktemp("xla-cache")
    return {"PJRT_DEVICE": "CPU", "XLA_PERSISTENT_CACHE_PATH": str(cache), "TF_CPP_MIN_LOG_LEVEL": "2"}


def xla_run(ckpt: Path, python: str, env: dict[str, str], **kwargs: object) -> Run:
    return runs.torchrun(ckpt, FLAGS, python=python, nproc=1, env=env, timeout=300, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, xla_python: str, xla_env: dict[str, str]) -> tuple[str, Path]:
    """(params hash, checkpoint dir) of an uninterrupted run."""
    ckpt = tmp_path_factory.mktemp("reference") / "ckpt"
    run = xla_run(ckpt, xla_python, xla_env)
    assert run.rc == 0, run.stderr[-3000:]
    start = run.last("start")
    assert start["device"] == "xla:0" and start["parallelism"] == "xla-dp", start
    return str(run.last("done")["params_sha256"]), ckpt


def test_stop_checkpoints_and_the_resume_is_bit_for_bit(
    tmp_path: Path, xla_python: str, xla_env: dict[str, str], reference: tuple[str, Path]
) -> None:
    ckpt = tmp_path / "ckpt"
    stopped = xla_run(ckpt, xla_python, xla_env, on_event=once_at_step(2, lambda _: stop_file(ckpt).touch()))
    preempted = stopped.last("preempted")
    stop_step = int(preempted["step"])  # type: ignore[call-overload]
    assert stopped.rc == 0 and preempted["reasons"] == ["stop-file"]
    assert stop_step in complete_steps(ckpt) and (ckpt / f"step-{stop_step}" / ".complete").is_file()
    assert json.loads((ckpt / "PREEMPTED").read_text())["step"] == stop_step

    resumed = xla_run(ckpt, xla_python, xla_env)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert resumed.last("resumed")["step"] == stop_step and resumed.last("resumed")["rng_restored"] is True
    assert resumed.last("done")["params_sha256"] == reference[0]


def test_a_run_killed_while_saving_resumes_from_the_newest_complete_checkpoint(
    tmp_path: Path, xla_python: str, xla_env: dict[str, str], reference: tuple[str, Path]
) -> None:
    # The state a SIGKILL during the last save leaves (steps take milliseconds here, so a kill from the test
    # cannot land at a chosen step): state.pt half written, no .complete, no DONE.
    digest, finished = reference
    ckpt = tmp_path / "ckpt"
    shutil.copytree(finished, ckpt)
    (ckpt / "DONE").unlink()
    torn = ckpt / f"step-{STEPS}"
    (torn / ".complete").unlink()
    (torn / "state.pt").write_bytes((torn / "state.pt").read_bytes()[:1000])

    resumed = xla_run(ckpt, xla_python, xla_env)
    assert resumed.rc == 0, resumed.stderr[-3000:]
    assert resumed.last("resumed")["step"] == STEPS - STEPS % EVERY
    assert resumed.last("done")["params_sha256"] == digest
    assert complete_steps(ckpt)[-1] == STEPS


def test_graph_extraction_traces_a_few_steps_and_keeps_nothing(
    tmp_path: Path, xla_python: str, xla_env: dict[str, str]
) -> None:
    # neuron_parallel_compile sets NEURON_EXTRACT_GRAPHS_ONLY; the user's own flags (here --steps 8 with
    # --warmup-steps 2) pass unchanged.
    ckpt = tmp_path / "ckpt"
    run = xla_run(ckpt, xla_python, {**xla_env, "NEURON_EXTRACT_GRAPHS_ONLY": "1"})
    assert run.rc == 0, run.stderr[-3000:]
    assert run.last("done")["step"] == 2
    assert not ckpt.exists()  # no checkpoints, no DONE marker


def test_several_cpu_processes_are_refused_rather_than_trained_apart(
    tmp_path: Path, xla_python: str, xla_env: dict[str, str]
) -> None:
    run = runs.torchrun(tmp_path / "ckpt", FLAGS, python=xla_python, nproc=2, env=xla_env, timeout=300)
    assert run.rc != 0
    assert "torchrun started 2 workers but the XLA runtime sees 1 replica(s) on CPU" in run.stderr
    assert not any(e.get("event") == "start" for e in run.events)


def test_the_entry_point_imports_without_torch_xla() -> None:
    # The main venv has no torch_xla: every other device kind must still work there.
    code = "import jobs.train, jobs.training.trainer, sys; sys.exit('torch_xla' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_rendered_trainium_script_runs_stops_and_resumes_end_to_end(
    tmp_path: Path, xla_python: str, xla_env: dict[str, str]
) -> None:
    # The prod stack's Trainium script with one worker per node (the CPU client's limit), real torchrun and
    # torch-xla, stand-ins for srun, scontrol, enroot and neuron_parallel_compile (tests/render/standins.py).
    config, _ = load_stack("prod")
    flags = [str(runs.TRAIN), *runs.TINY, "--steps", "60", "--checkpoint-every", "25", "--warmup-steps", "10"]

    sandbox = job_sandbox(tmp_path / "job", torchrun=Path(xla_python).parent / "torchrun")
    target = dataclasses.replace(sandbox.target(target_for_partition(config, "prod", "trainium")), procs_per_node=1)
    script = sandbox.root / "trn.sbatch"
    script.write_text(render_job(target, flags, nodes=1))
    env = {**xla_env, "FAKE_NODE": "127.0.0.1", "SLURM_JOB_NODELIST": "127.0.0.1", "SLURM_NNODES": "1"}
    uninterrupted = run_script(sandbox, script, env)
    assert uninterrupted.returncode == 0 and "training finished" in uninterrupted.stdout, uninterrupted.stderr[-3000:]
    digest = last_event(uninterrupted.stdout, "done")["params_sha256"]
    # The precompile ran the user's flags unchanged under graph extraction, and left only its marker.
    (compile_call,) = sandbox.calls("neuron_parallel_compile")
    assert compile_call["argv"][-len(flags):] == flags
    own_cache = sandbox.shared / "neuron-cache" / pwd.getpwuid(os.getuid()).pw_name  # the user's own (own_directory.sh)
    assert len(list((own_cache / "precompiled").iterdir())) == 1

    # The same job again from no checkpoint, on the same shared file system: the graphs stay compiled (one
    # precompile in all), and a stop, requeue and resume end on the uninterrupted run's parameters.
    shutil.rmtree(sandbox.checkpoints)
    sandbox.checkpoints.mkdir()
    stopped = run_script(sandbox, script, env, stop_after_step=5)
    assert stopped.returncode == 0 and "requeueing (restart 1 of 3)" in stopped.stdout, stopped.stderr[-3000:]
    assert [c["argv"] for c in sandbox.calls("scontrol") if c["argv"][0] == "requeue"] == [["requeue", "42"]]
    stop_step = last_event(stopped.stdout, "preempted")["step"]

    resumed = run_script(sandbox, script, {**env, "SLURM_RESTART_COUNT": "1"})
    assert resumed.returncode == 0 and "training finished" in resumed.stdout, resumed.stderr[-3000:]
    assert "graphs already compiled" in resumed.stdout and len(sandbox.calls("neuron_parallel_compile")) == 1
    assert last_event(resumed.stdout, "resumed")["step"] == stop_step
    assert last_event(resumed.stdout, "done")["params_sha256"] == digest
