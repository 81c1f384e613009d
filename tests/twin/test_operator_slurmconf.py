"""slurm.conf, cgroup.conf and the Controller's /etc/slurm as slurm-operator v1.2.1 writes them: the upstream
Go tests' cases (internal/builder/controllerbuilder/controller_config_test.go, internal/builder/common/
common_test.go, internal/utils/config/config_test.go, internal/utils/domainname/domainname_test.go) and the
shipped stacks' plans."""

from __future__ import annotations

import random
from typing import Any

import pytest

from scripts.twin.operator import confbuilder, names, slurmconf
from scripts.twin.operator.etcfiles import EtcFile, controller_etc_files
from tests.twin.operator_plan import slinky


def controller(name: str = "slurm", namespace: str = "", **spec: Any) -> dict[str, Any]:
    return {"kind": "Controller", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def nodeset(name: str, partition: dict[str, Any] | None = None, hostname: str = "", **spec: Any) -> dict[str, Any]:
    spec = {"controllerRef": {"name": "slurm"}, **spec}
    if partition is not None:
        spec["partition"] = partition
    if hostname:
        spec["template"] = {"spec": {"hostname": hostname}}
    return {"kind": "NodeSet", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


# --- internal/utils/config/config_test.go Test_configBuilder_Build ---------------------------------------------


def test_config_builder_empty_and_with_options() -> None:
    assert confbuilder.build_config([]) == ""
    props = [confbuilder.prop("foo", "bar"), confbuilder.raw("fizz ~ buzz")]
    assert confbuilder.build_config(props, sep="=", final_newline=False) == "foo=bar\nfizz ~ buzz"


# --- controller_config_test.go Test_buildNodeSetConf -----------------------------------------------------------


def test_nodeset_conf_empty() -> None:
    assert slurmconf.build_nodeset_conf([]) == ""


def test_nodeset_conf_sorted_by_name_with_enabled_partitions_only() -> None:
    items = [
        nodeset("nodeset-0", {"enabled": False, "config": "MaxTime=UNLIMITED OverSubscribe=EXCLUSIVE"}),
        nodeset("nodeset-1", {"enabled": True, "config": "MaxTime=UNLIMITED OverSubscribe=EXCLUSIVE"}),
        nodeset("nodeset-2", {"enabled": True, "config": "MaxTime=UNLIMITED PreemptMode=REQUEUE"}),
    ]
    want = ("NodeSet=nodeset-0 Feature=nodeset-0\n"
            "NodeSet=nodeset-1 Feature=nodeset-1\n"
            "PartitionName=nodeset-1 Nodes=nodeset-1 MaxTime=UNLIMITED OverSubscribe=EXCLUSIVE\n"
            "NodeSet=nodeset-2 Feature=nodeset-2\n"
            "PartitionName=nodeset-2 Nodes=nodeset-2 MaxTime=UNLIMITED PreemptMode=REQUEUE")
    rng = random.Random(0)
    for _ in range(5):
        rng.shuffle(items)
        assert slurmconf.build_nodeset_conf(items) == want


def test_nodeset_name_comes_from_the_template_hostname() -> None:
    # GetSlurmNodeSetName: "foo-" -> "foo" (the "with accounting, nodesets, config" case's NodeSet).
    conf = slurmconf.build_nodeset_conf([nodeset("slurm-foo", {"enabled": True}, hostname="foo-")])
    assert conf == "NodeSet=foo Feature=foo\nPartitionName=foo Nodes=foo "  # the empty config's trailing space


# --- Test_buildPrologEpilogConf / Test_buildPrologEpilogSlurmctldConf ------------------------------------------

PROLOGS = ["prolog-0.sh", "prolog-1.sh", "prolog-2.sh"]
EPILOGS = ["epilog-0.sh", "epilog-1.sh", "epilog-2.sh"]


@pytest.mark.parametrize(("prolog", "epilog", "want"), [
    ([], [], ""),
    (PROLOGS, [], "Prolog=prolog-0.sh\nProlog=prolog-1.sh\nProlog=prolog-2.sh"),
    ([], EPILOGS, "Epilog=epilog-0.sh\nEpilog=epilog-1.sh\nEpilog=epilog-2.sh"),
    (PROLOGS, EPILOGS, "Prolog=prolog-0.sh\nProlog=prolog-1.sh\nProlog=prolog-2.sh\n"
                       "Epilog=epilog-0.sh\nEpilog=epilog-1.sh\nEpilog=epilog-2.sh"),
])
def test_prolog_epilog_conf(prolog: list[str], epilog: list[str], want: str) -> None:
    assert slurmconf.build_prolog_epilog_conf(prolog, epilog) == want
    assert slurmconf.build_prolog_epilog_conf(prolog[::-1], epilog[::-1]) == want


@pytest.mark.parametrize(("prolog", "epilog", "want"), [
    ([], [], ""),
    (["prolog-slurmctld-0.sh", "prolog-slurmctld-1.sh", "prolog-slurmctld-2.sh"], [],
     "PrologSlurmctld=/etc/slurm/prolog-slurmctld-0.sh\nPrologSlurmctld=/etc/slurm/prolog-slurmctld-1.sh\n"
     "PrologSlurmctld=/etc/slurm/prolog-slurmctld-2.sh"),
    ([], ["epilog-slurmctld-0.sh", "epilog-slurmctld-1.sh", "epilog-slurmctld-2.sh"],
     "EpilogSlurmctld=/etc/slurm/epilog-slurmctld-0.sh\nEpilogSlurmctld=/etc/slurm/epilog-slurmctld-1.sh\n"
     "EpilogSlurmctld=/etc/slurm/epilog-slurmctld-2.sh"),
    (["prolog-slurmctld-0.sh"], ["epilog-slurmctld-0.sh"],
     "PrologSlurmctld=/etc/slurm/prolog-slurmctld-0.sh\nEpilogSlurmctld=/etc/slurm/epilog-slurmctld-0.sh"),
])
def test_prolog_epilog_slurmctld_conf(prolog: list[str], epilog: list[str], want: str) -> None:
    assert slurmconf.build_prolog_epilog_slurmctld_conf(prolog[::-1], epilog[::-1]) == want


# --- Test_isCgroupEnabled, buildCgroupConf ---------------------------------------------------------------------


@pytest.mark.parametrize(("conf", "want"), [
    ("CgroupPlugin=autodetect", True),
    ("# Multiline file\ncgroupplugin=autodetect # this is a comment\nignoresystemd=yes", True),
    ("CgroupPlugin=disabled", False),
    ("# Multiline file\ncgroupplugin=disabled # this is a comment\nignoresystemd=yes", False),
])
def test_is_cgroup_enabled(conf: str, want: bool) -> None:
    assert slurmconf.is_cgroup_enabled(conf) is want


def test_cgroup_conf_default() -> None:
    assert slurmconf.build_cgroup_conf() == "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n"


# --- common_test.go Test_BuildMergedConfig, Test_parseSlurmConfKV, Test_parseKVKey -----------------------------


@pytest.mark.parametrize(("conf", "params", "want"), [
    ("", {}, ""),
    ("", {"Foo": ["bar", "baz"]}, ""),
    ("Foo=fizz,buzz", {"Foo": ["bar", "baz"]}, "Foo=bar,baz,buzz,fizz"),
    ("Foo=fizz,buzz,", {"Foo": ["bar", "baz"]}, "Foo=bar,baz,buzz,fizz"),
    ("Foo=fizz,overlap,buzz", {"Foo": ["bar", "overlap", "baz"]}, "Foo=bar,baz,buzz,fizz,overlap"),
    ("Stuff0=junk\nFoo=bar,overlap\nStuff1=junk\nFizz=buzz,overlap\nStuff2=junk",
     {"Foo": ["thing", "overlap"], "Fizz": ["thing", "overlap"], "Other": ["thing"]},
     "Fizz=buzz,overlap,thing\nFoo=bar,overlap,thing"),
    ("Stuff0=junk\nfoo=bar,overlap\nStuff1=junk\nfizz=buzz,overlap\nStuff2=junk",
     {"Foo": ["Thing", "Overlap"], "Fizz": ["Thing", "Overlap"], "Other": ["Thing"]},
     "Fizz=Overlap,Thing,buzz\nFoo=Overlap,Thing,bar"),
    ("Foo=bar,opt=1", {"Foo": ["this", "that=2"]}, "Foo=bar,opt=1,that=2,this"),
    ("Foo=overlap=1", {"Foo": ["overlap=0"]}, "Foo=overlap=0"),
    ("#\n## HEADER\nFoo=bar # comment\n# Foo=bar1", {"Foo": ["opt"]}, "Foo=bar,opt"),
    ("Foo=bar0\nFoo=bar1", {"Foo": ["opt"]}, "Foo=bar1,opt"),
])
def test_build_merged_config(conf: str, params: dict[str, list[str]], want: str) -> None:
    assert slurmconf.build_merged_config(conf, params) == want


@pytest.mark.parametrize(("conf", "want"), [
    ("", {}),
    ("Foo=Bar\nfizz=buzz", {"foo": "Bar", "fizz": "buzz"}),
    ("Foo=Bar\n# test\nfizz=buzz # comment", {"foo": "Bar", "fizz": "buzz"}),
    ("Foo=first\n# ignored\nFoo=second", {"foo": "second"}),
    ("Foo=bar #notpartofvalue", {"foo": "bar"}),
    ("Foo=opt0,\\\nopt1", {"foo": "opt0,opt1"}),
    ("Foo=a,\\\nb,\\\nc", {"foo": "a,b,c"}),
])
def test_parse_slurm_conf_kv(conf: str, want: dict[str, str]) -> None:
    assert slurmconf.parse_slurm_conf_kv(conf) == want


@pytest.mark.parametrize(("s", "want"), [("", ""), ("foo=bar", "foo"), ("FooOpt=bar", "fooopt")])
def test_parse_kv_key(s: str, want: str) -> None:
    assert slurmconf.parse_kv_key(s) == want


# --- domainname_test.go Test_clusterDomain (resolv.conf texts of the same shapes) -------------------------------


@pytest.mark.parametrize(("resolv", "want"), [
    (None, "cluster.local"),
    ("", "cluster.local"),
    ("search slurm.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\n", "cluster.local"),
    ("# custom\nsearch slurm.svc.foo.local svc.foo.local foo.local\noptions ndots:5\n", "foo.local"),
    ("search\nnameserver 10.96.0.10\n", "cluster.local"),
])
def test_cluster_domain(resolv: str | None, want: str) -> None:
    assert names.cluster_domain(resolv) == want


# --- TestBuilder_BuildControllerConfigExternal (the minimal slurm.conf, exact text) ---------------------------

MINIMAL_HEAD = ("#\n### GENERAL ###\nClusterName=_slurm\nSlurmUser=slurm\nSlurmctldHost=slurm-controller-0\n"
                "SlurmctldPort=6817\n#\n### PLUGINS & PARAMETERS ###\nAuthType=auth/slurm\nCredType=cred/slurm\n"
                "AuthAltTypes=auth/jwt\n#\n### ACCOUNTING ###\n")


def test_minimal_slurm_conf_default_and_with_extra_conf() -> None:
    want = MINIMAL_HEAD + "AccountingStorageType=accounting_storage/none\n"
    assert slurmconf.build_slurm_conf_minimal(controller(), None) == want
    assert slurmconf.build_slurm_conf_minimal(controller(extraConf="MinJobAge=2"), None) == want


def test_minimal_slurm_conf_with_accounting() -> None:
    ctl = controller(accountingRef={"name": "slurm"}, configFileRefs=[{"name": "slurm-config"}])
    acc = slurmconf.accounting_for_controller(ctl, [{"kind": "Accounting", "metadata": {"name": "slurm",
                                                                                        "namespace": ""}}])
    assert slurmconf.build_slurm_conf_minimal(ctl, acc) == MINIMAL_HEAD + (
        "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=slurm-accounting\n"
        "AccountingStoragePort=6819\n")


# --- TestBuilder_BuildControllerConfig -----------------------------------------------------------------------

EXIT = "#!/usr/bin/sh\nexit 0"

DEFAULT_SLURM_CONF = """#
### GENERAL ###
ClusterName=_slurm
SlurmUser=slurm
SlurmctldHost=slurm-controller-0(slurm-controller.)
SlurmctldPort=6817
StateSaveLocation=/var/spool/slurmctld/_slurm
SlurmdUser=root
SlurmdPort=6818
SlurmdSpoolDir=/var/spool/slurmd
MaxNodeCount=1024
#
### LOGGING ###
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmSchedLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
#
### PLUGINS & PARAMETERS ###
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt.key
AuthInfo=use_client_ids
SlurmctldParameters=enable_configless,reconfig_on_restart
#
### ACCOUNTING ###
AccountingStorageType=accounting_storage/none
#
### PROLOG & EPILOG ###
Prolog=00-exit.sh
Epilog=00-exit.sh
#
### EXTRA CONFIG ###
MinJobAge=2
"""


def test_controller_config_default_case_exact_text() -> None:
    ctl = controller(extraConf="MinJobAge=2", prologScriptRefs=[{"name": "prolog"}],
                     epilogScriptRefs=[{"name": "epilog"}])
    cms = {"prolog": configmap("prolog", {"00-exit.sh": EXIT}), "epilog": configmap("epilog", {"00-exit.sh": EXIT})}
    data = slurmconf.controller_config_data(ctl, [], None, cms)
    assert data == {"slurm.conf": DEFAULT_SLURM_CONF, "cgroup.conf": "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n"}


def test_controller_config_with_accounting_nodesets_and_a_cgroup_conf() -> None:
    ctl = controller(accountingRef={"name": "slurm"}, configFileRefs=[{"name": "slurm-config"}])
    ns = nodeset("slurm-foo", {"enabled": True}, hostname="foo-", extraConf="features=bar")
    ns["metadata"]["namespace"] = ""
    acc = {"kind": "Accounting", "metadata": {"name": "slurm", "namespace": ""}}
    cms = {"slurm-config": configmap("slurm-config", {"cgroup.conf": "CgroupPlugin=autodetect", "foo.conf": "Foo=bar"})}
    data = slurmconf.controller_config_data(ctl, [ns], acc, cms)
    assert set(data) == {"slurm.conf"}  # the configFileRefs ConfigMap's cgroup.conf wins
    conf = data["slurm.conf"]
    assert "AccountingStorageType=accounting_storage/slurmdbd\nAccountingStorageHost=slurm-accounting\n" in conf
    assert "### NODESET & PARTITION ###\nNodeSet=foo Feature=foo\nPartitionName=foo Nodes=foo \n" in conf


@pytest.mark.parametrize(("field", "scripts"), [
    ("prologScriptRefs", ["00-first.sh", "90-second.sh"]),
    ("epilogScriptRefs", ["00-cleanup.sh", "90-finalize.sh"]),
])
def test_controller_config_scripts_of_several_configmaps(field: str, scripts: list[str]) -> None:
    ctl = controller(**{field: [{"name": "cm-1"}, {"name": "cm-2"}]})
    cms = {"cm-1": configmap("cm-1", {scripts[0]: EXIT}), "cm-2": configmap("cm-2", {scripts[1]: EXIT})}
    conf = slurmconf.controller_slurm_conf(ctl, [], None, cms)
    for script in scripts:
        assert script in conf


def test_controller_config_missing_configmap_fails() -> None:
    with pytest.raises(KeyError, match="not in the plan"):
        slurmconf.controller_config_data(controller(configFileRefs=[{"name": "absent"}]), [], None, {})


def test_merged_config_metrics_and_jwks() -> None:
    ctl = controller(namespace="slurm", clusterName="c1", metrics={"enabled": True},
                     jwksKeyRef={"name": "jwks", "key": "jwks.json"},
                     extraConf="SlurmctldParameters=enable_job_state_cache,Enable_Configless\n"
                               "AuthAltParameters=disable_token_creation")
    conf = slurmconf.controller_slurm_conf(ctl, [], None, {})
    assert "SlurmctldHost=slurm-controller-0(slurm-controller.slurm)\n" in conf
    assert "StateSaveLocation=/var/spool/slurmctld/c1\n" in conf
    assert ("AuthAltParameters=jwt_key=/etc/slurm/jwt.key,jwks=/etc/slurm/jwks.json\n"
            "AuthInfo=use_client_ids\nSlurmctldParameters=enable_configless,reconfig_on_restart\n"
            "MetricsType=metrics/openmetrics\n#\n### ACCOUNTING ###\n") in conf
    assert conf.endswith(
        "### MERGED CONFIG ###\n"
        "AuthAltParameters=disable_token_creation,jwks=/etc/slurm/jwks.json,jwt_key=/etc/slurm/jwt.key\n"
        "SlurmctldParameters=enable_configless,enable_job_state_cache,reconfig_on_restart\n")


# --- the shipped stacks ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["prod", "dev"])
def stack(request: pytest.FixtureRequest) -> str:
    return request.param


def stack_slurm_conf(stack: str) -> str:
    s = slinky(stack)
    acc = slurmconf.accounting_for_controller(s.controller, [s.accounting])
    return slurmconf.controller_slurm_conf(s.controller, s.nodesets, acc, s.configmaps)


def test_stack_slurm_conf_head(stack: str) -> None:
    s = slinky(stack)
    conf = stack_slurm_conf(stack)
    cluster = s.controller["spec"]["clusterName"]
    assert conf.startswith(f"#\n### GENERAL ###\nClusterName={cluster}\nSlurmUser=slurm\n"
                           "SlurmctldHost=slurm-controller-0(slurm-controller.slurm)\nSlurmctldPort=6817\n"
                           f"StateSaveLocation=/var/spool/slurmctld/{cluster}\n")
    assert ("### ACCOUNTING ###\nAccountingStorageType=accounting_storage/slurmdbd\n"
            "AccountingStorageHost=slurm-accounting\nAccountingStoragePort=6819\n") in conf
    assert ("MetricsType=metrics/openmetrics\n" in conf) is bool(s.controller["spec"].get("metrics", {}).get("enabled"))


def test_stack_slurm_conf_nodesets_and_partitions(stack: str) -> None:
    s = slinky(stack)
    lines = stack_slurm_conf(stack).splitlines()
    for ns in s.nodesets:
        name = ns["metadata"]["name"]
        assert lines.count(f"NodeSet={name} Feature={name}") == 1
        partition = ns["spec"]["partition"]
        assert partition["enabled"]
        assert lines.count(f"PartitionName={name} Nodes={name} {partition['config']}") == 1
    assert [ln.split()[0] for ln in lines if ln.startswith("NodeSet=")] == sorted(
        f"NodeSet={n['metadata']['name']}" for n in s.nodesets)


def test_stack_slurm_conf_scripts_and_extra_conf_verbatim(stack: str) -> None:
    s = slinky(stack)
    conf = stack_slurm_conf(stack)
    prologs = sorted(k for ref in s.controller["spec"]["prologScriptRefs"] for k in s.configmaps[ref["name"]]["data"])
    epilogs = sorted(k for ref in s.controller["spec"]["epilogScriptRefs"] for k in s.configmaps[ref["name"]]["data"])
    section = "\n".join([f"Prolog={p}" for p in prologs] + [f"Epilog={e}" for e in epilogs])
    assert f"#\n### PROLOG & EPILOG ###\n{section}\n#\n" in conf
    extra = s.controller["spec"]["extraConf"]
    # One key the operator merges, AuthAltParameters (the token bound): its jwt_key and ours in MERGED CONFIG, last,
    # which is the value slurmctld keeps.
    assert conf.endswith(f"#\n### EXTRA CONFIG ###\n{extra}\n#\n### MERGED CONFIG ###\n"
                         "AuthAltParameters=jwt_key=/etc/slurm/jwt.key,max_token_lifespan=86400\n")


def test_prod_slurm_conf_gpu_h100() -> None:
    lines = stack_slurm_conf("prod").splitlines()
    assert "NodeSet=gpu-h100 Feature=gpu-h100" in lines
    assert "PartitionName=gpu-h100 Nodes=gpu-h100 MaxTime=7-00:00:00 State=UP ExclusiveUser=YES Default=YES" in lines


def test_stack_cgroup_conf_comes_from_the_configmap(stack: str) -> None:
    s = slinky(stack)
    acc = slurmconf.accounting_for_controller(s.controller, [s.accounting])
    assert "cgroup.conf" not in slurmconf.controller_config_data(s.controller, s.nodesets, acc, s.configmaps)
    without = {**s.controller, "spec": {**s.controller["spec"], "configFileRefs": [
        r for r in s.controller["spec"]["configFileRefs"] if "cgroup.conf" not in s.configmaps[r["name"]]["data"]]}}
    data = slurmconf.controller_config_data(without, s.nodesets, acc, s.configmaps)
    assert data["cgroup.conf"] == "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n"


def test_stack_controller_etc_files(stack: str) -> None:
    s = slinky(stack)
    acc = slurmconf.accounting_for_controller(s.controller, [s.accounting])
    files = controller_etc_files(s.controller, s.nodesets, acc, s.configmaps)
    assert files["slurm.conf"] == EtcFile("ConfigMap", "slurm-config", "slurm.conf", 0o610, generated=True)
    assert files["slurm.key"] == EtcFile("Secret", "slurm-auth-slurm", "slurm.key", 0o610)
    assert files["jwt.key"] == EtcFile("Secret", "slurm-auth-jwt", "jwt.key", 0o610)
    assert files["cgroup.conf"] == EtcFile("ConfigMap", "slurm-cgroup", "cgroup.conf", 0o610)
    refs = [r["name"] for f in ("configFileRefs", "prologScriptRefs", "epilogScriptRefs")
            for r in s.controller["spec"].get(f, [])]
    want = {"slurm.conf", "slurm.key", "jwt.key"} | {k for name in refs for k in s.configmaps[name]["data"]}
    assert set(files) == want
    for name in refs:
        for key in s.configmaps[name]["data"]:
            assert files[key] == EtcFile("ConfigMap", name, key, 0o610)
