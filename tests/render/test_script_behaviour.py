"""What a rendered job script does, run by bash with stand-ins for srun, scontrol, torchrun,
neuron_parallel_compile and enroot (tests/render/standins.py): the requeue budget, stale outcome markers,
the image imported once into /shared, and the Neuron precompile that runs once per set of graphs."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
from pathlib import Path

import pytest

from components.config.stackfile import load_stack
from jobs.render import JobTarget, container_image, render_image_pull, render_job, target_for_partition
from tests.render.standins import JobSandbox, exported

ME = pwd.getpwuid(os.getuid()).pw_name  # whose own directories the scripts use

IMAGE = "registry.example.com/train:1.0"
ENTRY = ["jobs/train.py", "--steps", "100", "--warmup-steps", "10"]


def prod(partition: str, image: str | None = IMAGE) -> JobTarget:
    config, _ = load_stack("prod")
    return target_for_partition(config, "prod", partition, image=image)


def write(sandbox: JobSandbox, text: str, name: str = "job.sbatch") -> Path:
    path = sandbox.root / name
    path.write_text(text)
    return path


@pytest.fixture
def h100(sandbox: JobSandbox) -> Path:
    return write(sandbox, render_job(sandbox.target(prod("gpu-h100")), ["jobs/train.py"], nodes=2))


def test_a_preempted_run_requeues_while_the_budget_lasts(sandbox: JobSandbox, h100: Path) -> None:
    for restarts in (0, 2):
        result = sandbox.run(h100, FAKE_OUTCOME="preempted", SLURM_RESTART_COUNT=str(restarts))
        assert result.returncode == 0, result.stderr
        assert f"requeueing (restart {restarts + 1} of 3)" in result.stdout
    assert [c["argv"] for c in sandbox.calls("scontrol") if c["argv"][0] == "requeue"] == [["requeue", "42"]] * 2


def test_the_fourth_preemption_does_not_requeue(sandbox: JobSandbox, h100: Path) -> None:
    # MAX_REQUEUES=3: restarts 0, 1 and 2 requeue; the run after the third requeue stops for good.
    result = sandbox.run(h100, FAKE_OUTCOME="preempted", SLURM_RESTART_COUNT="3")
    assert result.returncode == 1 and "3 requeues are used up" in result.stderr
    assert [c for c in sandbox.calls("scontrol") if c["argv"][0] == "requeue"] == []


@pytest.mark.parametrize("stale", ["DONE", "PREEMPTED"])
def test_a_stale_marker_from_an_earlier_run_is_not_believed(sandbox: JobSandbox, h100: Path, stale: str) -> None:
    (sandbox.checkpoints / stale).touch()  # left by an earlier run of the same job name
    result = sandbox.run(h100, FAKE_OUTCOME="crash", FAKE_RC="7")
    assert result.returncode == 7 and "training failed (exit 7)" in result.stderr
    assert [c for c in sandbox.calls("scontrol") if c["argv"][0] == "requeue"] == []


def test_a_finished_run_exits_0_without_requeue(sandbox: JobSandbox, h100: Path) -> None:
    result = sandbox.run(h100, SLURM_RESTART_COUNT="1")
    assert result.returncode == 0 and "training finished" in result.stdout
    assert [c for c in sandbox.calls("scontrol") if c["argv"][0] == "requeue"] == []


def test_the_step_runs_from_the_imported_file_with_shared_mounted_and_the_submit_directory_as_workdir(
        sandbox: JobSandbox, h100: Path) -> None:
    assert sandbox.run(h100).returncode == 0
    image = container_image(IMAGE, str(sandbox.shared))
    (srun,) = sandbox.calls("srun")
    assert srun["argv"][:5] == [
        "--kill-on-bad-exit=1", f"--container-image={image.file(ME)}", f"--container-name={image.name}",
        f"--container-mounts={sandbox.shared}:{sandbox.shared}", f"--container-workdir={sandbox.root}"]
    assert image.file(ME) == f"{sandbox.shared}/images/{ME}/registry.example.com+train+1.0.sqsh"
    (torchrun,) = sandbox.calls("torchrun")
    assert "--nproc-per-node=8" in torchrun["argv"] and torchrun["argv"][-1] == "jobs/train.py"


# --- checkpoints: a private directory per user and job -------------------------------------------------

DEFAULT_DIR = ("SLURM_EKS_CHECKPOINT_DIR",)  # unset: the script's own default


def checkpoint_dirs(sandbox: JobSandbox) -> list[str]:
    """SLURM_EKS_CHECKPOINT_DIR as each training step saw it."""
    return [c["env"]["SLURM_EKS_CHECKPOINT_DIR"] for c in sandbox.calls("torchrun")]


def test_each_job_checkpoints_in_a_directory_of_its_own_that_only_its_user_can_enter(
        sandbox: JobSandbox, h100: Path) -> None:
    mine = sandbox.checkpoint_root / pwd.getpwuid(os.getuid()).pw_name
    first = sandbox.run(h100, unset=DEFAULT_DIR, FAKE_OUTCOME="preempted")
    assert first.returncode == 0, first.stderr
    # A second job of the same name does not resume the first one's run: a directory of its own.
    second = sandbox.run(h100, unset=DEFAULT_DIR, SLURM_JOB_ID="43")
    assert second.returncode == 0, second.stderr
    assert checkpoint_dirs(sandbox) == [str(mine / "train-42"), str(mine / "train-43")]
    assert (mine / "train-42" / "PREEMPTED").exists() and not (mine / "train-43" / "PREEMPTED").exists()
    for path in (mine, mine / "train-42", mine / "train-43"):  # whatever the umask
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_a_requeued_job_resumes_in_the_same_directory(sandbox: JobSandbox, h100: Path) -> None:
    assert sandbox.run(h100, unset=DEFAULT_DIR, FAKE_OUTCOME="preempted").returncode == 0
    assert sandbox.run(h100, unset=DEFAULT_DIR, SLURM_RESTART_COUNT="1").returncode == 0
    first, requeued = checkpoint_dirs(sandbox)
    assert first == requeued and first.endswith("/train-42")


@pytest.mark.parametrize("root", ["checkpoints", "images"])
@pytest.mark.parametrize("squatted", ["symlink", "file"])
def test_a_user_directory_that_is_not_yours_is_refused(sandbox: JobSandbox, h100: Path, squatted: str,
                                                        root: str) -> None:
    mine = sandbox.shared / root / ME
    elsewhere = sandbox.root / "elsewhere"
    elsewhere.mkdir()
    if squatted == "symlink":  # someone's link into a directory they can read
        mine.symlink_to(elsewhere)
    else:
        mine.write_text("")
    result = sandbox.run(h100, unset=DEFAULT_DIR)
    assert result.returncode == 1 and f"{mine} is not a directory of yours" in result.stderr
    assert sandbox.calls("torchrun") == [] and sandbox.calls("srun") == [] and list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("root", ["checkpoints", "images", "neuron-cache"])
def test_a_directory_of_yours_that_others_can_write_is_refused(sandbox: JobSandbox, h100: Path, trainium: Path,
                                                               root: str) -> None:
    mine = sandbox.shared / root / ME
    mine.mkdir()
    mine.chmod(0o777)  # e.g. chmod -R a+w by mistake: anyone could now replace what the job runs or loads
    result = sandbox.run(trainium if root == "neuron-cache" else h100, unset=DEFAULT_DIR)
    assert result.returncode == 1 and f"{mine} is writable by others (mode 777): chmod 0700 {mine}" in result.stderr
    assert sandbox.calls("srun") == [] and sandbox.calls("enroot") == []


def test_a_file_someone_left_in_the_shared_image_directory_is_never_run(sandbox: JobSandbox, h100: Path) -> None:
    """The defect this layout closes: whoever made /shared/images/<reference>.sqsh first owned what every later
    job of that image ran. Such a file (and one in another user's directory) is now never looked at."""
    image = container_image(IMAGE, str(sandbox.shared))
    planted = sandbox.shared / "images" / f"{image.name}.sqsh"
    planted.write_text("someone else's code")
    (sandbox.shared / "images" / "mallory").mkdir()
    Path(image.file("mallory")).write_text("someone else's code")
    assert sandbox.run(h100).returncode == 0
    assert [c["argv"][2] for c in sandbox.calls("enroot")] == [f"{image.file(ME)}.partial"]
    assert f'--container-image={image.file(ME)}' in sandbox.calls("srun")[0]["argv"]
    assert Path(image.file(ME)).read_text() == "squashfs of docker://registry.example.com#train:1.0"
    assert stat.S_IMODE(Path(image.file(ME)).parent.stat().st_mode) == 0o700


def test_without_the_shared_checkpoint_directory_the_script_says_how_to_make_it(
        sandbox: JobSandbox, h100: Path) -> None:
    sandbox.checkpoint_root.rmdir()
    result = sandbox.run(h100, unset=DEFAULT_DIR)
    assert result.returncode == 1 and f"install -d -m 1777 {sandbox.checkpoint_root}" in result.stderr


def test_the_last_requeue_says_exactly_how_to_continue_and_that_command_resumes(
        sandbox: JobSandbox, h100: Path) -> None:
    used_up = sandbox.run(h100, unset=DEFAULT_DIR, FAKE_OUTCOME="preempted", SLURM_RESTART_COUNT="3",
                          FAKE_COMMAND=str(h100))
    directory = sandbox.checkpoint_root / pwd.getpwuid(os.getuid()).pw_name / "train-42"
    command = f"sbatch --export=ALL,SLURM_EKS_CHECKPOINT_DIR={directory} {h100}"
    assert used_up.returncode == 1
    assert used_up.stderr.strip().endswith(
        f"checkpoint saved in {directory}, but 3 requeues are used up; to continue from it: {command}")
    # That command: a new job (id, restart count) with the variable set, so the same directory.
    assert sandbox.run(h100, SLURM_EKS_CHECKPOINT_DIR=str(directory), SLURM_JOB_ID="77").returncode == 0
    assert checkpoint_dirs(sandbox) == [str(directory)] * 2
    # A crashed run says the same; a script sbatch read from stdin has no file to name.
    crashed = sandbox.run(h100, FAKE_OUTCOME="crash", FAKE_RC="5")
    assert crashed.stderr.strip().endswith(
        f"kept in {sandbox.checkpoints}; to continue from it: "
        f"sbatch --export=ALL,SLURM_EKS_CHECKPOINT_DIR={sandbox.checkpoints} <this job script>")


# --- images: imported once ----------------------------------------------------------------------------

def test_the_first_job_imports_the_image_and_later_jobs_use_the_file(sandbox: JobSandbox, h100: Path) -> None:
    image = container_image(IMAGE, str(sandbox.shared))
    first = sandbox.run(h100)
    assert first.returncode == 0, first.stderr
    assert [c["argv"] for c in sandbox.calls("enroot")] == [
        ["import", "-o", f"{image.file(ME)}.partial", "docker://registry.example.com#train:1.0"]]
    assert Path(image.file(ME)).read_text() == "squashfs of docker://registry.example.com#train:1.0"
    assert "importing docker://registry.example.com#train:1.0" in first.stdout
    second = sandbox.run(h100, SLURM_JOB_ID="43")
    assert second.returncode == 0 and "importing" not in second.stdout
    assert len(sandbox.calls("enroot")) == 1 and len(sandbox.calls("srun")) == 2


def test_a_failed_import_leaves_no_file_and_starts_no_step(sandbox: JobSandbox, h100: Path) -> None:
    image = container_image(IMAGE, str(sandbox.shared))
    result = sandbox.run(h100, FAKE_ENROOT_FAIL="1")
    assert result.returncode != 0 and "enroot import of docker://registry.example.com#train:1.0 failed" in result.stderr
    assert not Path(image.file(ME)).exists() and not Path(f"{image.file(ME)}.partial").exists()
    assert sandbox.calls("srun") == []
    assert sandbox.run(h100).returncode == 0 and len(sandbox.calls("enroot")) == 2  # the next job tries again


def test_a_partial_file_left_by_a_killed_import_is_replaced(sandbox: JobSandbox, h100: Path) -> None:
    image = container_image(IMAGE, str(sandbox.shared))
    Path(image.file(ME)).parent.mkdir(parents=True)
    Path(f"{image.file(ME)}.partial").write_text("half")  # enroot import refuses an existing output file
    assert sandbox.run(h100).returncode == 0
    assert Path(image.file(ME)).read_text().startswith("squashfs of") and not Path(f"{image.file(ME)}.partial").exists()


def test_concurrent_imports_take_turns_and_import_once(sandbox: JobSandbox) -> None:
    pull = write(sandbox, render_image_pull(sandbox.target(prod("gpu-h100"))), "pull.sh")
    env = sandbox.env(FAKE_ENROOT_SLEEP="1")
    runs = [subprocess.Popen(["bash", str(pull)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(3)]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], outputs
    assert len(sandbox.calls("enroot")) == 1  # the other two waited on the lock, then found the file


def test_a_squashfs_image_is_used_as_it_is(sandbox: JobSandbox) -> None:
    squashfs = sandbox.shared / "mine.sqsh"
    script = write(sandbox, render_job(sandbox.target(prod("gpu-h100", image=str(squashfs))), ["jobs/train.py"]))
    assert sandbox.run(script).returncode == 0
    assert sandbox.calls("enroot") == []
    assert f"--container-image={squashfs}" in sandbox.calls("srun")[0]["argv"]


# --- Trainium: the user's flags, precompiled once per set of graphs ------------------------------------

@pytest.fixture
def trainium(sandbox: JobSandbox) -> Path:
    return write(sandbox, render_job(sandbox.target(prod("trainium")), ENTRY, nodes=2))


def steps(sandbox: JobSandbox) -> list[tuple[bool, list[str]]]:
    """Each torchrun call: (under graph extraction?, its argv)."""
    return [("NEURON_EXTRACT_GRAPHS_ONLY" in c["env"], c["argv"]) for c in sandbox.calls("torchrun")]


def test_the_users_flags_reach_the_precompile_and_the_training_unchanged(sandbox: JobSandbox, trainium: Path) -> None:
    result = sandbox.run(trainium)
    assert result.returncode == 0, result.stderr
    (compile_, training) = steps(sandbox)
    assert compile_[0] and not training[0]
    for _, argv in (compile_, training):
        assert argv[-len(ENTRY):] == ENTRY and argv.count("--steps") == 1
        assert "--nproc-per-node=32" in argv and "--tee=3" in argv
    assert [c["argv"][0] for c in sandbox.calls("neuron_parallel_compile")] == ["torchrun"]
    for call in sandbox.calls("torchrun"):
        assert call["env"]["SLURM_EKS_DEVICE"] == "xla"
        assert "NEURON_RT_NUM_CORES" not in call["env"]
        assert "--auto-cast=none" in call["env"]["NEURON_CC_FLAGS"].split()
        # The compiled graphs the runtime loads come from the user's own cache, never one others can write.
        assert call["env"]["NEURON_COMPILE_CACHE_URL"] == str(sandbox.shared / "neuron-cache" / ME)
    assert (sandbox.checkpoints / "DONE").exists()


def test_a_second_run_with_the_same_graphs_skips_the_precompile(sandbox: JobSandbox, trainium: Path) -> None:
    assert sandbox.run(trainium).returncode == 0
    second = sandbox.run(trainium, SLURM_JOB_ID="43")
    assert second.returncode == 0 and "graphs already compiled" in second.stdout
    assert len(sandbox.calls("neuron_parallel_compile")) == 1
    assert [extract for extract, _ in steps(sandbox)] == [True, False, False]


@pytest.mark.parametrize("change", ["flags", "NEURON_CC_FLAGS", "nodes", "cache"])
def test_new_graphs_are_precompiled_again(sandbox: JobSandbox, trainium: Path, change: str) -> None:
    assert sandbox.run(trainium).returncode == 0
    script, env = trainium, {}
    if change == "flags":
        script = write(sandbox, render_job(sandbox.target(prod("trainium")), [*ENTRY, "--seq-len", "2048"], nodes=2),
                       "other.sbatch")
    elif change == "NEURON_CC_FLAGS":
        env = {"NEURON_CC_FLAGS": "--model-type=transformer --auto-cast=none -O1"}
    elif change == "nodes":
        env = {"SLURM_NNODES": "4"}
    else:
        env = {"NEURON_COMPILE_CACHE_URL": str(sandbox.shared / "other-cache")}
    result = sandbox.run(script, SLURM_JOB_ID="43", **env)
    assert result.returncode == 0 and "graphs already compiled" not in result.stdout
    assert len(sandbox.calls("neuron_parallel_compile")) == 2


def test_a_failed_precompile_still_trains_and_is_retried_next_time(sandbox: JobSandbox, trainium: Path) -> None:
    result = sandbox.run(trainium, FAKE_COMPILE_RC="3")
    assert result.returncode == 0 and "ahead-of-time compilation failed (exit 3)" in result.stderr
    assert [extract for extract, _ in steps(sandbox)] == [False]  # training ran
    assert sandbox.run(trainium).returncode == 0
    assert len(sandbox.calls("neuron_parallel_compile")) == 2


def test_g5_with_efa_gets_the_same_efa_settings() -> None:
    config, _ = load_stack("dev")
    partition = config.partitions["gpu"].model_copy(update={"instance_types": ["g5.48xlarge"], "efa": True})
    config = config.model_copy(update={"partitions": {"gpu": partition}})
    text = render_job(target_for_partition(config, "dev", "gpu", image=IMAGE), ["jobs/train.py"])
    assert {k: v for k, v in exported(text).items() if k.startswith("FI_")} == {"FI_EFA_USE_HUGE_PAGE": "0"}
