"""slurm/node/node-check.sh, run as slurmd runs it: an environment holding only SLURMD_NODENAME,
the config path, the fakes' PATH prefix and the fakes' control variables (slurmd.c
run_script_health_check builds an empty env plus SLURMD_NODENAME)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from slurm.agent.health.reasons import parse_reason
from tests.conftest import require_tool, unavailable

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "slurm" / "node" / "node-check.sh"
FAKES = Path(__file__).resolve().parent / "fakes"
NODE = "gpu-p5-0"

# dcgmi diag -r 1 tables in dcgmi's layout (NVIDIA/DCGM v4.5.3 dcgmi/Diag.cpp DIAG_HEADER, DIAG_DATA).
DCGM_PASS = """\
Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 4.5.3                                          |
|-----  Deployment  --------+------------------------------------------------|
| software                  | Pass                                           |
|                           | GPU0: Pass                                     |
+---------------------------+------------------------------------------------+
"""
DCGM_FAIL = DCGM_PASS.replace(
    "| software                  | Pass                                           |\n"
    "|                           | GPU0: Pass                                     |\n",
    "| software                  | Fail                                           |\n"
    "|                           | GPU0: Fail                                     |\n"
    "| Warning: GPU0             | Persistence mode for GPU 0 is disabled.        |\n",
)

XID_79 = "[ 5107.6] NVRM: Xid (PCI:0000:10:1c): 79, pid=1896, GPU has fallen off the bus.\n"
XID_13 = "[ 5107.6] NVRM: Xid (PCI:0000:10:1c): 13, pid=1896, Graphics Exception: ESR 0x1\n"


class Node:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.env_file = tmp / "health.env"
        self.scontrol_log = tmp / "scontrol.log"
        self.call_log = tmp / "calls.log"
        self.shared = tmp / "fsx"
        self.shared.mkdir()
        self.config = {
            "GPUS": "8",
            "EFA": "0",
            "NEURON_DEVICES": "0",
            "SHARED_MOUNT": str(self.shared),
            "DISK_PATHS": str(tmp),
            "MIN_FREE_MB": "1",
            "DCGM_DIAG_LEVEL": "0",
            "JOB_MAP_DIR": "",
        }
        self.fake = {"FAKE_MOUNTPOINTS": str(self.shared)}

    def run(self, *args: str, write_env: bool = True, **extra: str) -> subprocess.CompletedProcess[str]:
        if write_env:
            self.env_file.write_text("".join(f'{k}="{v}"\n' for k, v in self.config.items()))
        env = {
            "SLURMD_NODENAME": NODE,
            "SLURM_EKS_HEALTH_ENV": str(self.env_file),
            "SLURM_EKS_HEALTH_PATH": str(FAKES),
            "FAKE_SCONTROL_LOG": str(self.scontrol_log),
            "FAKE_CALL_LOG": str(self.call_log),
            **self.fake,
            **extra,
        }
        return subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)

    def updates(self) -> list[str]:
        if not self.scontrol_log.exists():
            return []
        return [line for line in self.scontrol_log.read_text().splitlines() if line.startswith("update")]

    def drained_reason(self) -> str:
        (update,) = self.updates()
        assert update.startswith(f"update nodename={NODE} state=drain reason=")
        return update.split(" reason=", 1)[1]


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def assert_drained(node: Node, check: str) -> str:
    reason = parse_reason(node.drained_reason())
    assert reason is not None and reason.check == check
    assert len(reason.detail) <= 200
    return reason.detail


def assert_verdict(node: Node, result: subprocess.CompletedProcess[str], fires: bool, check: str, detail: str) -> None:
    """A check that fires exits 1 having drained the node with its reason; one that does not exits 0, drains nothing."""
    if fires:
        assert result.returncode == 1
        assert assert_drained(node, check) == detail
    else:
        assert result.returncode == 0, result.stdout
        assert node.updates() == []


def test_script_is_executable_and_parses():
    assert os.access(SCRIPT, os.X_OK)
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_shellcheck():
    shellcheck = require_tool("shellcheck", "make system-packages installs it")  # under CI=true: a failure
    subprocess.run([shellcheck, str(SCRIPT)], check=True)
    # SC1091: the fakes source _calllog.sh by a path shellcheck cannot follow.
    fakes = [str(p) for p in FAKES.iterdir()]
    subprocess.run([shellcheck, "-s", "bash", "-e", "SC1091", *fakes], check=True)


def test_no_env_file_exits_0_and_calls_nothing(node: Node):
    result = node.run(write_env=False)
    assert result.returncode == 0
    assert "not a slurm-eks accelerator node" in result.stdout
    assert not node.call_log.exists()


def test_healthy_node_passes_without_scontrol_update(node: Node):
    result = node.run()
    assert result.returncode == 0, result.stdout
    assert node.updates() == []


def test_seven_of_eight_gpus_drains_gpu_count(node: Node):
    result = node.run(FAKE_GPUS="7")
    assert result.returncode == 1
    assert assert_drained(node, "gpu-count") == "nvidia-smi sees 7 GPUs, GRES expects 8"


def test_nvidia_smi_failing_drains_gpu_driver(node: Node):
    assert node.run(FAKE_NVSMI_FAIL="1").returncode == 1
    assert "couldn't communicate" in assert_drained(node, "gpu-driver")


def test_nvidia_smi_missing_drains_gpu_driver(node: Node, tmp_path: Path):
    # A PATH prefix without nvidia-smi: copy the other fakes only.
    fakes = tmp_path / "fakes-no-smi"
    shutil.copytree(FAKES, fakes)
    (fakes / "nvidia-smi").unlink()
    node.env_file.write_text("GPUS=8\nDISK_PATHS=\n")
    result = node.run(write_env=False, SLURM_EKS_HEALTH_PATH=str(fakes))
    if shutil.which("nvidia-smi"):
        pytest.skip("a real nvidia-smi is on this machine's PATH")
    assert result.returncode == 1
    assert "not found" in assert_drained(node, "gpu-driver")


@pytest.mark.parametrize(("ecc", "fires"), [("3:2", True), ("0:0", False), ("NA", False)])
def test_ecc(node: Node, ecc: str, fires: bool):
    result = node.run(FAKE_ECC=ecc)
    assert_verdict(node, result, fires, "ecc", "uncorrectable volatile ECC errors: GPU 3: 2")


@pytest.mark.parametrize(("log", "fires"), [(XID_79, True), (XID_13, False), ("", False)])
def test_xid(node: Node, log: str, fires: bool):
    dmesg = node.tmp / "dmesg.txt"
    dmesg.write_text("[    0.0] Linux version 6.1\n" + log)
    result = node.run(FAKE_DMESG_FILE=str(dmesg))
    assert_verdict(node, result, fires, "xid", "critical Xid 79 on PCI:0000:10:1c")


def test_restricted_dmesg_skips_xid_check(node: Node):
    result = node.run(FAKE_DMESG_FAIL="1")
    assert result.returncode == 0
    assert "skipping the Xid check" in result.stdout
    assert node.updates() == []


@pytest.mark.parametrize(("table", "rc", "fires"), [(DCGM_FAIL, 226, True), (DCGM_PASS, 0, False)])
def test_dcgm(node: Node, table: str, rc: int, fires: bool):
    node.config["DCGM_DIAG_LEVEL"] = "1"
    out = node.tmp / "dcgmi.txt"
    out.write_text(table)
    result = node.run(FAKE_DCGMI_FILE=str(out), FAKE_DCGMI_RC=str(rc))
    assert "dcgmi diag -r 1" in node.call_log.read_text()
    assert_verdict(node, result, fires, "dcgm", "dcgmi diag -r 1 failed: software")


def test_dcgm_nonzero_exit_without_table_fails(node: Node):
    node.config["DCGM_DIAG_LEVEL"] = "1"
    out = node.tmp / "dcgmi.txt"
    out.write_text("Error: unable to establish a connection to the specified host: localhost\n")
    assert node.run(FAKE_DCGMI_FILE=str(out), FAKE_DCGMI_RC="255").returncode == 1
    assert assert_drained(node, "dcgm").startswith("dcgmi diag -r 1 exited 255: Error: unable")


def test_dcgm_off_by_default(node: Node):
    assert node.run(FAKE_DCGMI_RC="1").returncode == 0
    assert "dcgmi" not in node.call_log.read_text()


def device_tree(tmp: Path, efa: int, neuron: int, down: tuple[int, ...] = ()) -> dict[str, str]:
    """What a device plugin gives a container and the kernel shows of it: /dev/infiniband/uverbs<N> (char 231,
    192+N) with /sys/class/infiniband_verbs/uverbs<N>/ibdev naming rdmap<N>s0, whose port 1 is "4: ACTIVE"
    unless N is in `down`; /dev/neuron<N> (char). The fakes' environment points the check there."""
    if os.geteuid() != 0:
        unavailable("making character devices needs root")
    dev, sys = tmp / "dev", tmp / "sys"
    (dev / "infiniband").mkdir(parents=True)
    for n in range(efa):
        os.mknod(dev / "infiniband" / f"uverbs{n}", 0o666 | stat.S_IFCHR, os.makedev(231, 192 + n))
        verbs = sys / "class" / "infiniband_verbs" / f"uverbs{n}"
        verbs.mkdir(parents=True)
        (verbs / "ibdev").write_text(f"rdmap{n}s0\n")
        port = sys / "class" / "infiniband" / f"rdmap{n}s0" / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text("1: DOWN\n" if n in down else "4: ACTIVE\n")
    for n in range(neuron):
        os.mknod(dev / f"neuron{n}", 0o666 | stat.S_IFCHR, os.makedev(240, n))
    (dev / "neuron_not_a_device").write_text("")  # a regular file is no device
    return {"SLURM_EKS_HEALTH_DEV": str(dev), "SLURM_EKS_HEALTH_SYS": str(sys)}


@pytest.mark.parametrize(("count", "fires"), [(31, True), (0, True), (32, False)])
def test_efa_counts_the_devices_the_plugin_gave(node: Node, count: int, fires: bool):
    node.config["EFA"] = "32"
    result = node.run(**device_tree(node.tmp, count, 0))
    assert_verdict(node, result, fires, "efa",
                   f"the pod has {count} EFA devices (/dev/infiniband/uverbs*), expected 32")


def test_efa_port_down_fires(node: Node):
    node.config["EFA"] = "4"
    result = node.run(**device_tree(node.tmp, 4, 0, down=(2,)))
    assert_verdict(node, result, True, "efa", "EFA port not ACTIVE: uverbs2=rdmap2s0 (1: DOWN)")


@pytest.mark.parametrize(("count", "fires"), [(15, True), (16, False)])
def test_neuron_counts_the_devices_the_plugin_gave(node: Node, count: int, fires: bool):
    node.config.update(GPUS="0", NEURON_DEVICES="16")
    result = node.run(**device_tree(node.tmp, 0, count))
    assert_verdict(node, result, fires, "neuron", "the pod has 15 Neuron devices (/dev/neuron*), expected 16")


def test_no_tool_of_the_image_is_needed_for_efa_or_neuron(node: Node):
    """The check runs where Slinky's slurmd image has no fi_info or neuron-ls: the fakes' copies are never called."""
    node.config.update(GPUS="0", EFA="8", NEURON_DEVICES="16")
    assert node.run(**device_tree(node.tmp, 8, 16)).returncode == 0
    calls = node.call_log.read_text() if node.call_log.exists() else ""
    assert "fi_info" not in calls and "neuron-ls" not in calls


def test_shared_not_mounted(node: Node):
    assert node.run(FAKE_MOUNTPOINTS="").returncode == 1
    assert assert_drained(node, "shared") == f"{node.shared} is not mounted"


def test_shared_stat_failing(node: Node):
    assert node.run(FAKE_STAT_FAIL="1").returncode == 1
    assert assert_drained(node, "shared") == f"stat -f {node.shared} failed (rc 1)"


def test_disk_full(node: Node):
    node.config["MIN_FREE_MB"] = str(10**12)
    assert node.run().returncode == 1
    assert "MB free, needs 1000000000000 MB" in assert_drained(node, "disk")


def test_first_failure_gives_reason_and_all_are_printed(node: Node):
    node.config.update(EFA="32", MIN_FREE_MB=str(10**12))
    result = node.run(FAKE_GPUS="7", **device_tree(node.tmp, 1, 0))
    assert result.returncode == 1
    assert_drained(node, "gpu-count")
    for check in ("gpu-count", "efa", "disk"):
        assert f"slurm-eks: {check}: " in result.stdout


def test_persons_drain_is_not_overwritten(node: Node):
    result = node.run(FAKE_GPUS="7", FAKE_NODE_STATE="IDLE+DRAIN", FAKE_NODE_REASON="bad cable, ticket 42")
    assert result.returncode == 1
    assert "drained by a person" in result.stdout
    assert node.updates() == []


def test_our_earlier_drain_is_kept_and_never_resumed(node: Node):
    earlier = dict(FAKE_NODE_STATE="IDLE+DRAIN", FAKE_NODE_REASON="slurm-eks: xid: critical Xid 79 on PCI:0000:10:1c")
    assert node.run(FAKE_GPUS="7", **earlier).returncode == 1
    # Healthy again: still no update of any kind (no state=resume).
    assert node.run(**earlier).returncode == 0
    assert node.updates() == []
    assert "resume" not in node.scontrol_log.read_text().lower()


def test_prolog_fails_and_drains_on_fast_check(node: Node):
    result = node.run(SLURM_SCRIPT_CONTEXT="prolog_slurmd", FAKE_GPUS="7", SLURM_JOB_ID="7")
    assert result.returncode == 1
    assert_drained(node, "gpu-count")


def test_prolog_skips_slow_checks(node: Node):
    node.config.update(DCGM_DIAG_LEVEL="1", MIN_FREE_MB=str(10**12))
    result = node.run("prolog", FAKE_DMESG_FAIL="1", FAKE_DCGMI_RC="1")
    assert result.returncode == 0, result.stdout
    calls = node.call_log.read_text()
    assert "dcgmi" not in calls and "dmesg" not in calls
    assert node.updates() == []


def test_prolog_writes_mapping_and_epilog_removes_it(node: Node):
    node.config["JOB_MAP_DIR"] = str(node.tmp / "job-map")
    job = dict(SLURM_JOB_ID="101", SLURM_JOB_GPUS="0,3", SLURM_JOB_UID="0", SLURM_JOB_USER="root")
    assert node.run(SLURM_SCRIPT_CONTEXT="prolog_slurmd", **job).returncode == 0
    mapdir = node.tmp / "job-map"
    assert (mapdir / "0").read_text() == "101\n"
    assert (mapdir / "3").read_text() == "101\n"
    # Another job sharing GPU 3 stays listed after job 101 ends.
    assert node.run("prolog", SLURM_JOB_ID="202", SLURM_JOB_GPUS="3").returncode == 0
    assert (mapdir / "3").read_text() == "101\n202\n"
    assert node.run(SLURM_SCRIPT_CONTEXT="epilog_slurmd", **job).returncode == 0
    assert not (mapdir / "0").exists()
    assert (mapdir / "3").read_text() == "202\n"


def test_prolog_failure_writes_no_mapping(node: Node):
    node.config["JOB_MAP_DIR"] = str(node.tmp / "job-map")
    assert node.run("prolog", FAKE_GPUS="7", SLURM_JOB_ID="5", SLURM_JOB_GPUS="0").returncode == 1
    assert not (node.tmp / "job-map" / "0").exists()


@pytest.fixture
def shm_dir():
    if os.geteuid() != 0 or not Path("/dev/shm").is_dir():
        unavailable("needs root (chown) and /dev/shm: run the tests as root, as CI does")
    path = Path(tempfile.mkdtemp(prefix="slurm-eks-test-", dir="/dev/shm"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(("others", "removed"), [("301", True), ("301 302", False)])
def test_epilog_cleans_users_shm_only_when_no_other_job(node: Node, shm_dir: Path, others: str, removed: bool):
    mine, root_owned = shm_dir / "nccl-shm-1", shm_dir / "root-file"
    mine.write_text("x")
    root_owned.write_text("x")
    os.chown(mine, 4242, 4242)
    result = node.run(
        "epilog",
        SLURM_JOB_ID="301",
        SLURM_JOB_UID="4242",
        SLURM_JOB_USER="alice",
        SLURM_EKS_HEALTH_SHM=str(shm_dir),
        FAKE_SQUEUE_JOBS=others,
    )
    assert result.returncode == 0
    assert mine.exists() is not removed
    assert root_owned.exists()


def test_epilog_never_cleans_outside_dev_shm(node: Node):
    victim = node.tmp / "victim"
    victim.write_text("x")
    if os.geteuid() == 0:
        os.chown(victim, 4242, 4242)
    result = node.run(
        "epilog", SLURM_JOB_ID="1", SLURM_JOB_UID="4242", SLURM_JOB_USER="alice", SLURM_EKS_HEALTH_SHM=str(node.tmp)
    )
    assert result.returncode == 0
    assert victim.exists()


def test_epilog_keeps_shm_when_squeue_fails(node: Node, shm_dir: Path):
    mine = shm_dir / "f"
    mine.write_text("x")
    os.chown(mine, 4242, 4242)
    result = node.run(
        "epilog",
        SLURM_JOB_ID="1",
        SLURM_JOB_UID="4242",
        SLURM_JOB_USER="alice",
        SLURM_EKS_HEALTH_SHM=str(shm_dir),
        FAKE_SQUEUE_FAIL="1",
    )
    assert result.returncode == 0
    assert mine.exists()
