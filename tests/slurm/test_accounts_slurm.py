"""The accounts reconcile on the real local Slurm (25.11, the version the cluster runs, built from source:
slurmdbd on MariaDB, sacctmgr, slurmctld): a stack with two teams and three real Linux users, applied with the
real sacctmgr, then jobs submitted as those users.

The local cluster runs with the slurm.conf lines the product generates for a stack with accounts
(components/slinky/slurm_conf.py `accounting_conf`: priority/multifactor with the stack's weights, and
AccountingStorageEnforce=associations,limits,qos,safe), and one partition with the stack's `AllowAccounts=`
(`partition_conf`). Not shown here: the in-cluster Job's sackd and auth/slurm (the local cluster uses munge).
"""

from __future__ import annotations

import json
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.config.cluster import ClusterConfig
from components.slinky import slurm_conf
from components.slinky.accounts_document import desired_document
from slurm import client
from slurm.agent.accounts.plan import render
from slurm.agent.accounts.reconcile import apply_file, plan_file
from slurm.cli_backend import CliBackend
from slurm.jobinfo import JobInfo
from slurm.local import ClusterStatus
from slurm.local.config import CLUSTER_NAME
from slurm.local.settings import SettingsCluster, with_settings
from slurm.local.topology import detect_node
from tests.conftest import unavailable
from tests.slurm.accounts_stack import LIMITED, USERS, stack

pytestmark = pytest.mark.slurm
BACKEND = CliBackend()
TIMEOUT_S = 60


def write_document(path: Path, config: ClusterConfig) -> Path:
    path.write_text(desired_document(config, CLUSTER_NAME).json())
    return path


def run(*command: str, user: str | None = None) -> str:
    argv = ["runuser", "-u", user, "--", *command] if user else list(command)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr or done.stdout}"
    return done.stdout


def rows(*args: str) -> list[list[str]]:
    return [line.split("|") for line in run("sacctmgr", "--noheader", "--parsable2", *args).splitlines()]


def submit(user: str, *options: str) -> int:
    """A one-task job as `user` (its default account and that account's default QoS)."""
    out = run("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "-n1", *options, user=user)
    return int(out.split(";")[0])


def wait(job_id: int, condition: Any, what: str) -> JobInfo:
    job = client.wait_for(job_id, condition, timeout_s=TIMEOUT_S, backend=BACKEND)
    assert condition(job), f"job {job_id} never {what}: {job.state} {job.reason}"
    return job


def running(job: JobInfo) -> bool:
    return job.state == "RUNNING"


@pytest.fixture(scope="module")
def linux_users() -> Iterator[list[str]]:
    """Real users (jobs run as them); removed afterwards. Left over from an interrupted run: reused."""
    if shutil.which("useradd") is None:
        unavailable("useradd is missing (Debian's passwd package)")
    made = []
    try:
        for name, uid in USERS.items():
            try:
                if pwd.getpwnam(name).pw_uid != uid:
                    unavailable(f"user {name} exists here with another UID; the test needs {name} as UID {uid}")
            except KeyError:
                run("useradd", "--uid", str(uid), "--no-create-home", "--shell", "/bin/sh", name)
            made.append(name)
        yield made
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def config() -> ClusterConfig:
    return stack()


@pytest.fixture(scope="module")
def cluster(local_slurm: ClusterStatus, config: ClusterConfig, linux_users: list[str]) -> Iterator[SettingsCluster]:
    """The stack's settings; slurmctld restarts after the Linux users exist, so associations left in slurmdbd by an
    interrupted run get their UIDs as it starts (see `applied`)."""
    settings = [f"{key}={value}" for key, value in slurm_conf.accounting_conf(config).items()]
    node = detect_node().name
    settings.append(f"PartitionName={LIMITED} Nodes={node} {slurm_conf.partition_conf(LIMITED, config)}")
    with with_settings(settings) as running_cluster:
        yield running_cluster


@pytest.fixture(scope="module")
def applied(cluster: SettingsCluster, linux_users: list[str], config: ClusterConfig,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The stack applied; afterwards everything it made removed again (an empty document). The Linux users come
    first: slurmctld looks a user's UID up when the association reaches it, else only at its start and hourly
    (SchedMD/slurm slurm-25-11-6-1 src/slurmctld/controller.c, `assoc_mgr_set_missing_uids`), and refuses the
    jobs of a user it could not resolve ("Invalid account or account/partition combination")."""
    document = write_document(tmp_path_factory.mktemp("accounts") / "desired.json", config)
    apply_file(document, lambda text: None)
    yield document
    for user in linux_users:
        subprocess.run(["scancel", "--user", user], capture_output=True, timeout=30)
    empty = document.with_name("empty.json")
    empty.write_text(json.dumps({"format": 1, "cluster": CLUSTER_NAME}))
    apply_file(empty, lambda text: None)


@pytest.fixture
def no_jobs(applied: Path, linux_users: list[str]) -> Iterator[None]:
    """Each job test leaves no job behind (root's fills the node in the fair-share test)."""
    yield
    for user in ["root", *linux_users]:
        subprocess.run(["scancel", "--user", user], capture_output=True, timeout=30)


def test_applied_twice_the_second_plan_is_empty(applied: Path) -> None:
    started = time.monotonic()
    # Applied by the fixture; applied again through the entry point the cluster Job runs.
    again = subprocess.run([sys.executable, "-m", "slurm.agent.accounts", "apply", "--desired", str(applied)],
                           capture_output=True, text=True, timeout=120)
    assert (again.returncode, again.stdout) == (0, "No changes.\n"), again.stderr
    assert plan_file(applied) == render([])
    print(f"second apply + plan: {time.monotonic() - started:.2f} s")
    # What slurmdbd holds is what the stack says.
    qos = {row[0]: row[1:] for row in rows("show", "qos", "format=Name,GrpTRES,MaxTRESPerUser,MaxWall,Priority")}
    assert qos["sek-a"] == ["gres/gpu=2", "gres/gpu=1", "01:00:00", "10"]
    assert qos["sek-b"] == ["gres/gpu=1", "", "", "10"]
    tree = {(row[0], row[1]): row[2:] for row in rows(
        "show", "association", f"cluster={CLUSTER_NAME}", "format=Account,User,ParentName,Share,QOS,DefaultQOS")}
    assert tree[("sek-research", "")] == ["root", "1", "normal", ""]  # no QOS of its own: root's
    assert tree[("sek-b", "")] == ["sek-research", "2", "sek-b", "sek-b"]
    assert {user for account, user in tree if account == "sek-a"} == {"", "sek-alice", "sek-bob"}
    defaults = dict(rows("show", "user", "format=User,DefaultAccount"))
    assert (defaults["sek-bob"], defaults["sek-carol"]) == ("sek-a", "sek-b")


def test_a_removed_user_and_limit_and_changed_settings_are_applied(applied: Path, config: ClusterConfig,
                                                                     tmp_path: Path) -> None:
    raw = config.model_dump(by_alias=True, exclude_none=True)
    raw["slurm"]["accounts"]["sek-a"]["users"] = ["sek-alice"]  # bob leaves team a: he stays in team b
    raw["slurm"]["qos"]["sek-a"].pop("maxTRESPerUser")
    raw["slurm"]["accounts"]["sek-research"]["description"] = "Research and more"
    raw["slurm"]["accounts"]["sek-b"]["fairshare"] = 3
    changed = write_document(tmp_path / "changed.json", ClusterConfig.model_validate(raw))
    try:
        assert plan_file(changed).splitlines() == [
            "0 to add, 4 to change, 1 to remove",
            "~ qos sek-a: MaxTRESPerUser gres/gpu=1 -> none",
            "~ account sek-research: Description research (managed by slurm-eks) -> research and more (managed by "
            "slurm-eks)",
            "~ account sek-b: Fairshare 2 -> 3",
            "~ user sek-bob: DefaultAccount sek-a -> sek-b",
            "- user sek-bob: account sek-a"]
        apply_file(changed, lambda text: None)
        assert plan_file(changed) == render([])
        assert dict(rows("show", "qos", "format=Name,MaxTRESPerUser"))["sek-a"] == ""
        assert rows("show", "association", f"cluster={CLUSTER_NAME}", "user=sek-bob", "format=Account") == [["sek-b"]]
        assert dict(rows("show", "user", "format=User,DefaultAccount"))["sek-bob"] == "sek-b"
        assert dict(rows("show", "account", "format=Account,Description"))["sek-research"] == \
            "research and more (managed by slurm-eks)"
    finally:
        apply_file(applied, lambda text: None)


def test_a_job_over_its_qos_gpus_pends_while_another_teams_runs(no_jobs: None) -> None:
    first = submit("sek-carol", "--gres=gpu:1", "--wrap=sleep 120")
    wait(first, running, "ran")
    second = submit("sek-carol", "--gres=gpu:1", "--wrap=sleep 120")
    wait(second, lambda job: job.reason == "QOSGrpGRES", "pended on its QoS's GPU limit")
    assert run("squeue", "--noheader", "--jobs", str(second), "--format=%T %a %q %r").split() == [
        "PENDING", "sek-b", "sek-b", "QOSGrpGRES"]
    other_team = submit("sek-alice", "--gres=gpu:1", "--wrap=sleep 120")
    wait(other_team, running, "ran beside team b's")
    assert client.status(second, BACKEND).reason == "QOSGrpGRES"


def test_a_partition_takes_only_its_accounts(no_jobs: None) -> None:
    wait(submit("sek-carol", f"--partition={LIMITED}", "--wrap=true"), lambda job: job.finished, "ran")
    # A job of another account is queued (EnforcePartLimits is unset: docs/nodes.md, scale from zero needs it
    # so) but never runs there, though the node is idle. bob is in both teams: his default account's job waits,
    # the same job under the partition's account runs. Slurm 25.11 gives the reason `PartitionConfig` and no
    # text: part_policy_valid_acct (src/slurmctld/partition_mgr.c, slurm-25-11-7-1) returns
    # ESLURM_INVALID_ACCOUNT without the "Job's account not permitted to use this partition" state_desc 22.05
    # wrote; job_limits_check (src/slurmctld/job_mgr.c, via _part_access_check) and select_nodes
    # (src/slurmctld/node_scheduler.c, then _select_nodes_parts in job_mgr.c) record it as WAIT_PART_CONFIG.
    refused = submit("sek-bob", f"--partition={LIMITED}", "--wrap=true")
    wait(refused, lambda job: job.reason == "PartitionConfig", "was held back by the partition")
    assert run("squeue", "--noheader", f"--jobs={refused}", "--format=%T %a %r").split() == [
        "PENDING", "sek-a", "PartitionConfig"]
    allowed = submit("sek-bob", f"--partition={LIMITED}", "--account=sek-b", "--wrap=true")
    wait(allowed, lambda job: job.finished, "ran")
    assert client.status(refused, BACKEND).state == "PENDING"


def test_the_team_that_used_the_cluster_gets_the_lower_fair_share(cluster: SettingsCluster, no_jobs: None) -> None:
    run("sacctmgr", "--immediate", "modify", "account", "where", "name=sek-a,sek-b", f"cluster={CLUSTER_NAME}",
        "set", "RawUsage=0")
    used = submit("sek-alice", "-c2", "--wrap=sleep 5")
    client.wait_for(used, timeout_s=TIMEOUT_S, backend=BACKEND)
    # slurmctld turns usage into fair-share factors every PriorityCalcPeriod (5 min) and when it starts.
    cluster.restart_controller()
    listed = run("sshare", "--noheader", "--parsable2", "--all", "--accounts=sek-a,sek-b",
                 "--format=Account,User,RawUsage,FairShare").splitlines()
    shares = {(account.strip(), user): (usage, fairshare)  # accounts are indented by depth
              for account, user, usage, fairshare in (line.split("|") for line in listed)}
    assert int(shares[("sek-a", "")][0]) > 0 and int(shares[("sek-b", "")][0]) == 0, listed
    assert float(shares[("sek-b", "sek-carol")][1]) > float(shares[("sek-a", "sek-alice")][1]), listed
    # Both teams wait behind a job filling the node: sprio shows team b's job ahead on fair share.
    wait(submit("root", "-n2", "--wrap=sleep 120"), running, "filled the node")
    alice, carol = submit("sek-alice", "--wrap=true"), submit("sek-carol", "--wrap=true")
    listed = run("sprio", "--noheader", f"--jobs={alice},{carol}", "--format=%i %u %F").splitlines()
    factors = {int(job): float(fairshare) for job, _, fairshare in (line.split() for line in listed)}
    assert factors[carol] > factors[alice], listed
