"""Day two on the twin, judged against the running cluster: people added to the stack reach the running login and
controller pods through the identity sidecar, with an open ssh session and its interactive `srun` surviving and
nothing restarted; and a partition the new config removes is refused while a job runs in it (named, with the drain
command), drained, and its job neither killed nor lost. The cluster is asked by the same KubectlFacts `slurm-eks
up` uses, through the twin's kubectl (scripts/twin/kubectl.py)."""

from __future__ import annotations

import copy
import subprocess
import time
from typing import Any

import pytest
import yaml

from components.config.cluster import FULL_KEY
from components.config.deployed_record import OUTPUT
from components.slinky.specs import IDENTITY_CONFIG_MAP
from scripts.change.cluster_facts import KubectlFacts, drain_and_wait, judge
from scripts.change.compare import compare
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from scripts.twin import kubectl
from scripts.twin.cluster import CONTAINER_PATH, Twin
from tests.config.helpers import raw_config
from tests.twin.conftest import STATE_ROOT, USERS
from tests.twin.researcher import START_BOUND_S, Researcher, admin, cluster_story, wait_for

pytestmark = [pytest.mark.twin]

KEYS = "/run/day-two"  # private keys, in the login pod (root's)
SSH = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
       "-o", "LogLevel=ERROR"]


def plan_of(stack: str, raw: dict[str, Any], name: str) -> Plan:
    """The plan of `stack` with config `raw` (what the next `pulumi up` would apply)."""
    directory = STATE_ROOT / "day-two" / name
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    (directory / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump({"config": {FULL_KEY: raw}}))
    plan, _ = run_plan(stack, directory)
    return plan


def manifests(plan: Plan, kind: str) -> dict[str, Any]:
    return {m["metadata"]["name"]: m for m in plan.manifests() if m.get("kind") == kind}


def new_key(twin: Twin, name: str) -> str:
    """A key pair made in the login pod; its public key."""
    login = twin.pod("login").started
    env = {"PATH": CONTAINER_PATH}
    login.exec(["bash", "-c", f"mkdir -p -m 0700 {KEYS} && rm -f {KEYS}/{name}* && "
                f"ssh-keygen -q -t ed25519 -N '' -C {name}@day-two -f {KEYS}/{name}"], env=env)
    return login.exec(["cat", f"{KEYS}/{name}.pub"], env=env).stdout.strip()


def ssh(twin: Twin, user: str, key: str, command: str) -> list[str]:
    """The argv (on this machine) of `ssh user@localhost command` from inside the login pod, to its own sshd."""
    return twin.pod("login").started.exec_argv([*SSH, "-i", f"{KEYS}/{key}", f"{user}@localhost", command],
                                               env={"PATH": CONTAINER_PATH})


def logs_in(twin: Twin, user: str, key: str, timeout_s: float = 90) -> str:
    """Wait until `user` logs in with `key`; their `id` there."""
    deadline, last = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        result = subprocess.run(ssh(twin, user, key, "id"), capture_output=True, text=True, timeout=30)
        if result.returncode == 0:
            return result.stdout
        last = result.stderr.strip()
        time.sleep(3)
    pytest.fail(f"{user} could not log in with the new key within {timeout_s:.0f} s: {last}", pytrace=False)


def pids(twin: Twin, *pods: str) -> dict[str, int]:
    return {f"{p}/{c.name}": twin.pods[p].started.container_pid(c.name) for p in pods
            for c in twin.pods[p].started.spec.containers}


def apply_identity(twin: Twin, before: Plan, after: Plan) -> list[str]:
    """What `pulumi up` changes for a new person: the identity ConfigMap and nothing of the login, controller or
    REST pods' specs (so nothing rolls them); the kubelet then updates the pods' volume of it."""
    for kind in ("LoginSet", "Controller", "RestApi"):
        assert manifests(before, kind) == manifests(after, kind), f"a new person changes the {kind}: it would roll"
    data = manifests(after, "ConfigMap")[IDENTITY_CONFIG_MAP]["data"]
    return twin.update_config_map(IDENTITY_CONFIG_MAP, data)


@pytest.mark.parametrize("stack_twin", ["dev"], indirect=True)
@pytest.mark.timeout(1200)
def test_adding_a_person_keeps_open_sessions_and_interactive_jobs(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    user = USERS[stack]
    partition = twin.nodesets[0]["metadata"]["name"]
    login = next(p.name for p in twin.pods.values() if p.kind == "login" and p.running)
    controller = next(p.name for p in twin.pods.values() if p.kind == "controller")
    raw = raw_config(stack)
    # 1. The researcher's new key: a key change reaches the login pod live (sshd reads the key file per login).
    with_key = copy.deepcopy(raw)
    with_key["slurm"]["identity"]["users"][user]["sshKeys"].append(new_key(twin, "researcher"))
    keyed = plan_of(stack, with_key, "with-key")
    assert login in apply_identity(twin, twin.plan, keyed)
    logs_in(twin, user, "researcher")
    # 2. An open session running an interactive job step.
    session = subprocess.Popen(ssh(twin, user, "researcher", f"srun --partition={partition} --nodes=1 --time=10 "
                                   "--job-name=interactive bash -c 'sleep 45; echo survived'"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_BOUND_S
        job_id = ""
        while time.monotonic() < deadline and not job_id:
            job_id = admin(twin, "squeue -h -n interactive -t RUNNING -o %i").stdout.strip()
            time.sleep(3)
        assert job_id, f"{stack}: the interactive srun never ran\n{cluster_story(twin)}"
        before = pids(twin, login, controller)
        # 3. A new person, added to the running cluster.
        with_person = copy.deepcopy(with_key)
        with_person["slurm"]["identity"]["users"]["newcomer"] = {
            "uid": 20777, "groups": list(raw["slurm"]["identity"]["users"][user]["groups"]),
            "sshKeys": [new_key(twin, "newcomer")]}
        account = next(name for name, a in with_person["slurm"]["accounts"].items() if user in a.get("users", []))
        with_person["slurm"]["accounts"][account]["users"].append("newcomer")
        changes = compare(keyed.outputs[OUTPUT]["config"], plan_of(stack, with_person, "with-person").outputs[OUTPUT][
            "config"])
        added = next(c for c in changes if c.name == "slurm.identity.users.newcomer")
        assert added.action == "add" and not added.refused, added
        assert login in apply_identity(twin, keyed, plan_of(stack, with_person, "with-person"))
        assert "uid=20777(newcomer)" in logs_in(twin, "newcomer", "newcomer")
        assert admin(twin, "getent passwd newcomer").stdout.startswith("newcomer:x:20777:")
        out, err = session.communicate(timeout=300)
        assert session.returncode == 0 and "survived" in out, (
            f"{stack}: the open session or its srun did not survive adding a person (exit {session.returncode}): "
            f"{out}{err}\n{cluster_story(twin)}")
        assert pids(twin, login, controller) == before, "a login or controller container restarted"
    finally:
        if session.poll() is None:
            session.kill()


class Kubectl(KubectlFacts):
    """The facts `slurm-eks up` reads, through the twin's kubectl."""

    def __init__(self, twin: Twin) -> None:
        super().__init__(None, kubectl.runner(twin))


@pytest.mark.parametrize("stack_twin", ["prod"], indirect=True)
@pytest.mark.timeout(1200)
def test_a_removed_partition_is_drained_and_its_job_is_neither_killed_nor_lost(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    partition = next(n["metadata"]["name"] for n in twin.nodesets if n["metadata"]["name"] != "gpu-a100")
    job = person.sbatch("--wrap=sleep 60; echo finished", partition, f"--partition={partition}", "--nodes=1",
                        "--time=10", f"--output={person.home}/drain-%j.out", "--job-name=long-run")
    wait_for(twin, job, ("RUNNING",), START_BOUND_S)
    deployed = twin.plan.outputs[OUTPUT]["config"]
    without = copy.deepcopy(deployed)
    del without["partitions"][partition]
    facts = Kubectl(twin)
    changes = compare(deployed, without)
    judge(changes, facts)
    (removal,) = [c for c in changes if c.name == f"partitions.{partition}"]
    assert removal.refused, f"{stack}: removing {partition} with {job.where} running was allowed"
    assert f"job {job.id} 'long-run' of {person.user} (RUNNING)" in removal.problem
    assert f"scontrol update PartitionName={partition} State=DRAIN" in removal.problem
    left = drain_and_wait(facts, partition, timeout_s=240, poll_s=5)
    assert left == [], f"{stack}/{partition}: jobs still there after the drain: {left}"
    state = admin(twin, f"sacct -n -X -j {job.id} -o State%20,ExitCode").stdout.split()
    assert state[:2] == ["COMPLETED", "0:0"], f"{job.where} did not finish after the drain: {state}"
    assert "finished" in person.sh(f"cat drain-{job.id}.out").stdout
    refused = person.sh(f"sbatch --partition={partition} --wrap=true", check=False)
    assert refused.returncode != 0, f"a drained partition took a new job: {refused.stdout}"
    again = compare(deployed, without)
    judge(again, facts)
    assert not [c for c in again if c.refused], [c.problem for c in again if c.refused]
    admin(twin, f"scontrol update PartitionName={partition} State=UP")  # later tests of this twin use it

