"""A partition's NodeSet as Slurm sees it, put together from our specs the way SlinkyProject/slurm-operator
v1.2.1 does (see tests/integration/test_scale_from_zero.py for the sources), and a job backend that submits as a
person. Shared by the tests that run dynamic nodes on the local Slurm."""

from __future__ import annotations

import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.slinky import specs
from components.slinky.health_settings import health_slurm_conf
from slurm import client
from slurm.backend import SubmitOptions
from slurm.cli_backend import CliBackend, parse_parsable, run
from slurm.local.dynamic import DynamicCluster
from tests.conftest import unavailable

# People run jobs as themselves: the Controller's `DisableRootJobs=YES` refuses root's. These tests submit as a
# Linux user of their own (`as_person`), given an association under Slurm's `root` account for the module, since
# the Controller's `AccountingStorageEnforce=associations` refuses a user without one. Not `nobody`: Slurm 25.11
# reserves that name for UID 99 (CHANGELOG/slurm-25.11.md "Always resolve user id 99 as user nobody"), and its
# uid_from_string("nobody") returns SLURM_AUTH_NOBODY instead of SLURM_SUCCESS without setting the UID
# (src/common/uid.c, slurm-25-11-7-1), so an association named nobody never gets Debian's UID 65534 and
# slurmctld refuses the job ("User 65534 not found", "Invalid account or account/partition combination").
PERSON = "sek-person"
PERSON_UID = 42010  # unlikely to exist on a machine running the tests


@contextmanager
def as_person() -> Iterator[str]:
    """PERSON as a Linux user, then with an association under Slurm's `root` account, until the block ends.
    The Linux user comes first: slurmctld looks the UID up when the association reaches it. Left over from an
    interrupted run: reused."""
    if shutil.which("useradd") is None:
        unavailable("useradd is missing (Debian's passwd package)")
    try:
        pwd.getpwnam(PERSON)
    except KeyError:
        run(["useradd", "--uid", str(PERSON_UID), "--no-create-home", "--shell", "/bin/sh", PERSON])
    try:
        run(["sacctmgr", "-i", "add", "user", PERSON, "account=root"])
        try:
            yield PERSON
        finally:
            run(["sacctmgr", "-i", "delete", "user", PERSON])
    finally:
        subprocess.run(["userdel", PERSON], capture_output=True, timeout=30)


class AsPerson(CliBackend):
    """sbatch as PERSON; everything else (squeue, sacct, scancel, the output file) as root, like an operator."""

    def submit(self, script: Path, options: SubmitOptions) -> int:
        return parse_parsable(run(["runuser", "-u", PERSON, "--", "sbatch", "--parsable", *options.sbatch_args(),
                                   str(script)]))


BACKEND = AsPerson()
TIMEOUT_S = 60


@dataclass(frozen=True)
class NodeSet:
    """One partition's NodeSet as Slurm sees it on the cluster."""

    name: str
    slurm_conf: tuple[str, ...]  # the lines the operator writes for it, then the Controller's extraConf
    slurmd_conf: str  # the `--conf` its pods' slurmd gets
    gpus: int

    def pod(self, ordinal: int) -> str:
        """Pod name, which is the Slurm node name (nodeset/utils/utils.go GetOrdinalPodName, no padding)."""
        return f"{self.name}-{ordinal}"


def slinky_slurmd_conf(nodeset: str, extra_conf: str) -> str:
    """worker_app.go `slurmdConfArgs`: the NodeSet's name is always a feature; Feature/Features items are
    merged into it; keys are title-cased and the items sorted."""
    items: dict[str, list[str]] = {"Features": [nodeset]}
    for item in extra_conf.split(" ") if extra_conf else []:
        key, value = item.split("=", 1)
        key = "Features" if key.title() in ("Feature", "Features") else key.title()
        items.setdefault(key, []).append(value)
    return " ".join(sorted(f"{key}={','.join(values)}" for key, values in items.items()))


def slinky_nodeset(config: ClusterConfig, name: str) -> NodeSet:
    spec = specs.nodeset_spec(name, config)
    # The Slurm NodeSet is named after the NodeSet object (ours: the partition) unless the pod template sets a
    # hostname (internal/builder/common/common.go GetSlurmNodeSetName).
    assert "hostname" not in spec["template"]["spec"]
    lines = [f"NodeSet={name} Feature={name}"]
    if spec["partition"]["enabled"]:
        lines.append(f"PartitionName={name} Nodes={name} {spec['partition']['config']}")
    # Name, storage class and ConfigMaps do not touch extraConf.
    controller = specs.controller_spec(config, cluster_name="slurm", storage_class="gp3", config_maps=[])
    extra = controller.get("extraConf", "")
    return NodeSet(
        name=name,
        slurm_conf=(*lines, *extra.splitlines()),
        slurmd_conf=slinky_slurmd_conf(name, spec.get("extraConf", "")),
        gpus=partition_instance(config.partitions[name]).accelerators,
    )


def setting_key(line: str) -> str | None:
    """`Key` of a one-item `Key=value` slurm.conf line (records such as `NodeSet=... Feature=...` have none)."""
    return line.split("=", 1)[0] if "=" in line and len(line.split()) == 1 else None


def replaced(lines: tuple[str, ...], changes: dict[str, str | None]) -> tuple[str, ...]:
    """`lines` with the settings named in `changes` given another value (None: left out)."""
    kept = [line for line in lines if setting_key(line) not in changes]
    return (*kept, *(f"{key}={value}" for key, value in changes.items() if value is not None))


def without_node_checks(nodeset: NodeSet, config: ClusterConfig) -> tuple[str, ...]:
    """The NodeSet's slurm.conf lines without the node checks' settings (tests/integration/test_node_health.py
    runs those): their HealthCheckProgram and Prolog paths exist only in the cluster's pods."""
    return replaced(nodeset.slurm_conf, dict.fromkeys(health_slurm_conf(config)))


def empty_partition(cluster: DynamicCluster, nodeset: NodeSet) -> None:
    """The NodeSet's partition without jobs (cancelled, and waited for) and without nodes."""
    active = [j.job_id for j in client.list_jobs(BACKEND) if j.partition == nodeset.name and not j.finished]
    for job_id in active:
        client.cancel(job_id, BACKEND)
    for job_id in active:
        client.wait_for(job_id, timeout_s=TIMEOUT_S, backend=BACKEND)
    cluster.leave_all()
