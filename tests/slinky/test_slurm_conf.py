"""The slurm.conf and cgroup.conf we add for a shared GPU cluster: jobs bound to and fenced into what they were
given, GPUs in accounting; nothing the operator writes itself; every key and value one Slurm 25.11 takes;
and the slurm.conf accepted by a real Slurm parser (the `scontrol` of Slurm 25.11 built by `make slurm`, which
reads slurm.conf before it does anything else)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.slinky import slurm_conf
from scripts.offline.plan_model import Plan
from tests.conftest import require_slurm
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, objects, plan_of, trainium_only, variant

# Keys SlinkyProject/slurm-operator v1.2.1 writes into slurm.conf itself (internal/builder/controllerbuilder/
# controller_config.go buildSlurmConf); SlurmctldParameters, AuthInfo and AuthAltParameters it merges with ours.
OPERATOR_KEYS = frozenset({
    "ClusterName", "SlurmUser", "SlurmctldHost", "SlurmctldPort", "StateSaveLocation", "SlurmdUser", "SlurmdPort",
    "SlurmdSpoolDir", "MaxNodeCount", "SlurmctldLogFile", "SlurmSchedLogFile", "SlurmdLogFile", "AuthType",
    "CredType", "AuthAltTypes", "AuthAltParameters", "AuthInfo", "SlurmctldParameters", "MetricsType",
    "AccountingStorageType", "AccountingStorageHost", "AccountingStoragePort", "PrologSlurmctld",
    "EpilogSlurmctld", "Prolog", "Epilog", "NodeSet", "PartitionName",
})
OPERATOR_MERGED = frozenset({"SlurmctldParameters", "AuthInfo", "AuthAltParameters"})  # its values and ours, merged
# What it writes as cgroup.conf when no configFileRefs ConfigMap has one (buildCgroupConf): ours replaces it.
OPERATOR_CGROUP = {"CgroupPlugin": "cgroup/v2", "IgnoreSystemd": "yes"}
# The values each key we use takes in Slurm 25.11 (SchedMD/slurm slurm-25-11-6-1, doc/man/man5/slurm.conf.5 and
# cgroup.conf.5); None: a free-form list (GRES names, TRES names).
SLURM_CONF_25_11: dict[str, frozenset[str] | None] = {
    "SelectType": frozenset({"select/cons_tres", "select/linear"}),
    "SelectTypeParameters": frozenset({"CR_CPU", "CR_CPU_Memory", "CR_Core", "CR_Core_Memory", "CR_Socket",
                                       "CR_Socket_Memory", "CR_Memory", "CR_ONE_TASK_PER_CORE",
                                       "CR_CORE_DEFAULT_DIST_BLOCK", "CR_LLN", "CR_Pack_Nodes"}),
    "TaskPlugin": frozenset({"task/affinity", "task/cgroup"}),
    "ProctrackType": frozenset({"proctrack/cgroup", "proctrack/linuxproc", "proctrack/pgid"}),
    "JobAcctGatherType": frozenset({"jobacct_gather/cgroup", "jobacct_gather/linux"}),
    "DisableRootJobs": frozenset({"YES", "NO"}),
    "GresTypes": None,
    "AccountingStorageTRES": None,
    "LaunchParameters": frozenset({"batch_step_set_cpu_freq", "cray_net_exclusive", "disable_send_gids",
                                   "enable_nss_slurm", "interactive_step_set_cpu_freq", "lustre_no_flush",
                                   "mem_sort", "mpir_use_nodeaddr", "slurmstepd_memlock", "slurmstepd_memlock_all",
                                   "test_exec", "ulimit_pam_adopt", "use_interactive_step"}),
    # A stack with accounts (accounting_conf); None: a number or a Slurm time.
    "PriorityType": frozenset({"priority/basic", "priority/multifactor"}),
    "PriorityWeightAge": None, "PriorityWeightFairshare": None, "PriorityWeightJobSize": None,
    "PriorityWeightPartition": None, "PriorityWeightQOS": None, "PriorityDecayHalfLife": None, "PriorityMaxAge": None,
    "AccountingStorageEnforce": frozenset({"all", "associations", "limits", "nojobs", "nosteps", "qos", "safe",
                                           "wckeys"}),
    # The node checks (components/slinky/health_settings.py); None: a path, a number of seconds.
    "HealthCheckProgram": None, "HealthCheckInterval": None,
    "HealthCheckNodeState": frozenset({"ALLOC", "ANY", "CYCLE", "IDLE", "NONDRAINED_IDLE", "MIXED", "START_ONLY"}),
    "PrologFlags": frozenset({"Alloc", "Contain", "DeferBatch", "NoHold", "ForceRequeueOnFail", "RunInJob",
                              "Serial"}),
    # srun's listening ports (components/slinky/slurm_conf.py SRUN_PORT_RANGE): "<min>-<max>".
    "SrunPortRange": None,
    "NamespaceType": frozenset({"namespace/linux", "namespace/tmpfs"}),
    "AuthAltParameters": None,  # max_token_lifespan=<seconds>, merged by the operator with its jwt_key
    # The flag options (options taking `=value` left out: we set none).
    "SchedulerParameters": frozenset({
        "allow_zero_lic", "assoc_limit_stop", "bf_allow_magnetic_slot", "bf_busy_nodes", "bf_continue",
        "bf_hetjob_immediate", "bf_hetjob_prio", "bf_licenses", "bf_one_resv_per_job", "bf_running_job_reserve",
        "bf_topopt_enable", "defer", "defer_batch", "disable_hetjob_steps", "disable_job_shrink",
        "enable_hetjob_steps", "enable_job_state_cache", "enable_user_top", "extra_constraints",
        "ignore_constraint_validation", "ignore_prefer_validation", "no_backup_scheduling", "nohold_on_prolog_fail",
        "pack_serial_at_end", "reduce_completing_frag", "requeue_on_resume_failure", "salloc_wait_nodes",
        "sbatch_wait_nodes", "spec_cores_first", "time_min_as_soft_limit", "whole_hetjob"}),
}
YES_NO = frozenset({"yes", "no"})
CGROUP_CONF_25_11: dict[str, frozenset[str]] = {
    "CgroupPlugin": frozenset({"cgroup/v1", "cgroup/v2", "autodetect", "disabled"}),
    "IgnoreSystemd": YES_NO, "ConstrainCores": YES_NO, "ConstrainRAMSpace": YES_NO, "ConstrainDevices": YES_NO,
}


def key_values(text: str) -> list[tuple[str, str]]:
    return [tuple(line.split("=", 1)) for line in text.splitlines() if line.strip()]  # type: ignore[misc]


@pytest.fixture(scope="module", params=["dev", "prod", "trainium-only"])
def plan(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Plan:
    if request.param == "trainium-only":
        return plan_of(variant("prod", trainium_only), tmp_path_factory.mktemp("trn"))
    return shipped_plan(request.param)


def controller_conf(plan: Plan) -> dict[str, str]:
    (controller,) = objects(plan, "Controller").values()
    return dict(key_values(controller["spec"]["extraConf"]))


def cgroup_conf(plan: Plan) -> dict[str, str]:
    (controller,) = objects(plan, "Controller").values()
    refs = {r["name"] for r in controller["spec"]["configFileRefs"]}
    (text,) = [cm["data"]["cgroup.conf"] for name, cm in objects(plan, "ConfigMap").items()
               if name in refs and "cgroup.conf" in cm["data"]]
    return dict(key_values(text))


def has_gpus(plan: Plan) -> bool:
    return any("Gres=gpu:" in ns["spec"].get("extraConf", "") for ns in objects(plan, "NodeSet").values())


def test_jobs_are_bound_fenced_and_accounted(plan: Plan) -> None:
    conf = controller_conf(plan)
    assert set(conf["TaskPlugin"].split(",")) == {"task/cgroup", "task/affinity"}
    assert conf["ProctrackType"] == "proctrack/cgroup"
    assert conf["JobAcctGatherType"] == "jobacct_gather/cgroup"
    assert conf["SelectType"] == "select/cons_tres" and conf["SelectTypeParameters"].endswith("_Memory")
    if has_gpus(plan):
        assert conf["GresTypes"] == "gpu" and "gres/gpu" in conf["AccountingStorageTRES"].split(",")
    else:
        assert "GresTypes" not in conf and "AccountingStorageTRES" not in conf


def test_each_job_gets_its_own_tmp_and_shm(plan: Plan) -> None:
    """namespace/tmpfs needs PrologFlags=Contain (slurm.conf(5) 25.11) and a job_container.conf that configless
    serves to slurmd; the twin runs it on the real slurmd (tests/twin/test_journey_steps.py)."""
    conf = controller_conf(plan)
    assert conf["NamespaceType"] == "namespace/tmpfs" and "Contain" in conf["PrologFlags"].split(",")
    (controller,) = objects(plan, "Controller").values()
    refs = {r["name"] for r in controller["spec"]["configFileRefs"]}
    (text,) = [cm["data"]["job_container.conf"] for name, cm in objects(plan, "ConfigMap").items()
               if name in refs and "job_container.conf" in cm["data"]]
    job_container = dict(key_values(text))
    assert job_container["Dirs"].split(",") == ["/tmp", "/dev/shm"]
    assert "%n" in job_container["BasePath"] and job_container["AutoBasePath"] == "true"


def test_nodes_with_devices_no_cgroup_fences_go_to_one_person_at_a_time(plan: Plan) -> None:
    """Neuron devices and EFA interfaces are not GRES here, so a job can open them on a node it shares: those
    partitions are ExclusiveUser=YES; a GPU partition without EFA relies on ConstrainDevices instead."""
    for name, nodeset in objects(plan, "NodeSet").items():
        options = nodeset["spec"]["partition"]["config"].split()
        gres = "Gres=gpu:" in nodeset["spec"].get("extraConf", "")
        efa = "efa" in nodeset["spec"].get("extraConf", "")
        assert ("ExclusiveUser=YES" in options) == (not gres or efa), f"{name}: {options}"


def test_cgroup_conf_confines_cores_memory_and_devices(plan: Plan) -> None:
    conf = cgroup_conf(plan)
    assert {k: conf[k] for k in ("ConstrainCores", "ConstrainRAMSpace", "ConstrainDevices")} == \
        dict.fromkeys(("ConstrainCores", "ConstrainRAMSpace", "ConstrainDevices"), "yes")
    # Ours replaces the operator's cgroup.conf, so it keeps what the operator's says.
    assert {k: conf[k] for k in OPERATOR_CGROUP} == OPERATOR_CGROUP


def test_nothing_twice_nor_what_the_operator_writes(plan: Plan) -> None:
    (controller,) = objects(plan, "Controller").values()
    keys = [k for k, _ in key_values(controller["spec"]["extraConf"])]
    assert len(keys) == len(set(keys))
    assert not set(keys) & (OPERATOR_KEYS - OPERATOR_MERGED)


def test_tokens_people_mint_expire_within_a_day(plan: Plan) -> None:
    assert controller_conf(plan)["AuthAltParameters"] == "max_token_lifespan=86400"


def test_every_key_and_value_is_slurm_25_11s(plan: Plan) -> None:
    for conf, manual in ((controller_conf(plan), SLURM_CONF_25_11), (cgroup_conf(plan), CGROUP_CONF_25_11)):
        for key, value in conf.items():
            assert key in manual, key
            allowed = manual[key]
            assert allowed is None or set(value.split(",")) <= allowed, f"{key}={value}"


def _parses(conf_dir: Path, text: str) -> subprocess.CompletedProcess[str]:
    """Slurm's own slurm.conf parser: `scontrol` reads SLURM_CONF (unknown keys and bad values are fatal)
    before its command, and `show hostnames` needs no daemon."""
    path = conf_dir / "slurm.conf"
    path.write_text(text)
    return subprocess.run([str(require_slurm() / "bin" / "scontrol"), "show", "hostnames", "n1"],
                          env={**os.environ, "SLURM_CONF": str(path)}, capture_output=True, text=True, timeout=30)


def _plugin_dir() -> Path:
    return require_slurm() / "lib" / "slurm"


def test_slurms_parser_accepts_it(plan: Plan, tmp_path: Path) -> None:
    # The operator's lines that matter to parsing (an address nothing listens on: nothing is contacted), one
    # node for the partition lines, then ours.
    base = "ClusterName=test\nSlurmctldHost=test(192.0.2.1)\nSlurmctldPort=1\nNodeName=n1 CPUs=2 State=UNKNOWN\n"
    partitions = "".join(f"PartitionName={name} Nodes=n1 {ns['spec']['partition']['config']}\n"
                         for name, ns in objects(plan, "NodeSet").items())
    (controller,) = objects(plan, "Controller").values()
    ours = controller["spec"]["extraConf"]
    result = _parses(tmp_path, base + partitions + ours)
    assert result.returncode == 0 and result.stdout.split() == ["n1"], result.stderr
    # The same parser refuses a key it does not know, so the pass above means something.
    assert _parses(tmp_path, base + ours + "ConstrainCores=yes\n").returncode != 0
    # Every plugin named exists as Slurm builds it (`select/cons_tres` -> select_cons_tres.so).
    plugins = [v for k, v in controller_conf(plan).items() if k.endswith(("Type", "Plugin")) and "/" in v]
    for name in (p for value in plugins for p in value.split(",")):
        assert (_plugin_dir() / f"{name.replace('/', '_')}.so").is_file(), name


def test_a_stack_with_accounts_gets_fair_share_and_enforced_limits(tmp_path: Path) -> None:
    prod = config_of(variant("prod", lambda raw: None))
    conf = slurm_conf.accounting_conf(prod)
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["AccountingStorageEnforce"].split(",") == ["associations", "limits", "qos", "safe"]
    assert (conf["PriorityWeightFairshare"], conf["PriorityWeightQOS"], conf["PriorityDecayHalfLife"]) == (
        str(prod.slurm.priority.weights.fairshare), str(prod.slurm.priority.weights.qos), "7-0")
    for key, value in conf.items():
        allowed = SLURM_CONF_25_11[key]
        assert allowed is None or set(value.split(",")) <= allowed, f"{key}={value}"
    assert slurm_conf.partition_conf("trainium", prod).split()[-1] == "AllowAccounts=llm"
    assert "AllowAccounts" not in slurm_conf.partition_conf("gpu-h100", prod)
    # No account declared: no priority or enforcement lines (jobs of users with no association still run).
    def no_accounts(raw: dict[str, Any]) -> None:
        raw["slurm"].pop("accounts")
        raw["partitions"]["trainium"].pop("accounts")

    assert slurm_conf.accounting_conf(config_of(variant("prod", no_accounts))) == {}
    # Slurm's parser takes them, AllowAccounts included.
    base = "ClusterName=test\nSlurmctldHost=test(192.0.2.1)\nSlurmctldPort=1\nNodeName=n1 CPUs=2 State=UNKNOWN\n"
    partition = f"PartitionName=trainium Nodes=n1 {slurm_conf.partition_conf('trainium', prod)}\n"
    result = _parses(tmp_path, base + partition + slurm_conf.lines(conf))
    assert result.returncode == 0, result.stderr
    assert _parses(tmp_path, base + "AccountingStorageEnforce=nonsense\n").returncode != 0


def test_srun_listens_on_one_range_outside_the_kernels_ephemeral_ports(plan: Plan) -> None:
    """SrunPortRange pins srun's ports so NetworkPolicies can admit them (components/segmentation/network_policies.py
    opens
    the same constant); outside Linux's default ip_local_port_range (32768-60999) no outgoing connection holds
    them, and clear of Slurm's daemons' ports."""
    low, high = (int(p) for p in controller_conf(plan)["SrunPortRange"].split("-"))
    assert (low, high) == slurm_conf.SRUN_PORT_RANGE
    assert 60999 < low < high <= 65535 and not low <= 6817 <= high
    # Room for 1000 sruns that make their own allocation (4 ports each, slurm.conf(5) SrunPortRange).
    assert high - low + 1 >= 4 * 1000
