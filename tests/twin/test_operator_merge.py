"""How the operator merges a user's container and pod spec onto its own (slurm-operator v1.2.1
internal/builder/common/container_test.go, pod_template_test.go) and its labels (internal/builder/labels/
labels_test.go), plus the strategic-merge-patch rules the port relies on."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.twin.operator import labels, merge

LIVEZ = {"httpGet": {"path": "/livez", "port": "slurmctld"}, "failureThreshold": 6, "periodSeconds": 10}
READYZ = {"httpGet": {"path": "/readyz", "port": "slurmctld"}}
TRUE = {"exec": {"command": ["true"]}}

# container_test.go TestBuilder_BuildContainer: (base, merge, want)
CONTAINER_CASES: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "empty": ({}, {}, {}),
    "merge": (
        {"name": "foo", "imagePullPolicy": "IfNotPresent", "args": ["-a", "-b"],
         "resources": {"limits": {"cpu": "250m", "memory": "500Mi"}}},
        {"name": "bar", "image": "nginx", "args": ["-c"], "resources": {"limits": {"cpu": "100m"}}},
        {"name": "bar", "image": "nginx", "imagePullPolicy": "IfNotPresent", "args": ["-a", "-b", "-c"],
         "resources": {"limits": {"cpu": "100m", "memory": "500Mi"}}},
    ),
    "livenessProbe exec replaces httpGet": (
        {"name": "slurmctld", "livenessProbe": LIVEZ},
        {"livenessProbe": TRUE},
        {"name": "slurmctld", "livenessProbe": {**TRUE, "failureThreshold": 6, "periodSeconds": 10}},
    ),
    "livenessProbe exec with custom thresholds": (
        {"name": "slurmctld", "livenessProbe": LIVEZ},
        {"livenessProbe": {**TRUE, "failureThreshold": 3, "periodSeconds": 5}},
        {"name": "slurmctld", "livenessProbe": {**TRUE, "failureThreshold": 3, "periodSeconds": 5}},
    ),
    "livenessProbe exec preserves other probes": (
        {"name": "slurmctld", "startupProbe": LIVEZ, "readinessProbe": READYZ, "livenessProbe": LIVEZ},
        {"livenessProbe": TRUE},
        {"name": "slurmctld", "startupProbe": LIVEZ, "readinessProbe": READYZ,
         "livenessProbe": {**TRUE, "failureThreshold": 6, "periodSeconds": 10}},
    ),
    "livenessProbe httpGet override preserves handler type": (
        {"name": "slurmctld", "livenessProbe": LIVEZ},
        {"livenessProbe": {"httpGet": {"path": "/healthz", "port": "slurmctld"}}},
        {"name": "slurmctld", "livenessProbe": {"httpGet": {"path": "/healthz", "port": "slurmctld"},
                                                "failureThreshold": 6, "periodSeconds": 10}},
    ),
    "no merge probe leaves base untouched": (
        {"name": "slurmctld", "livenessProbe": LIVEZ}, {}, {"name": "slurmctld", "livenessProbe": LIVEZ}),
    "merge probe when base has no probe": (
        {"name": "slurmctld"},
        {"readinessProbe": {"exec": {"command": ["test", "-f", "/var/run/slurmctld.pid"]}, "periodSeconds": 5,
                            "failureThreshold": 3},
         "livenessProbe": TRUE},
        {"name": "slurmctld",
         "readinessProbe": {"exec": {"command": ["test", "-f", "/var/run/slurmctld.pid"]}, "periodSeconds": 5,
                            "failureThreshold": 3},
         "livenessProbe": TRUE},
    ),
}


@pytest.mark.parametrize("case", CONTAINER_CASES)
def test_build_container(case: str) -> None:
    base, user, want = CONTAINER_CASES[case]
    assert merge.build_container(base, user) == want


def test_a_probe_with_no_handler_drops_the_operators_handler() -> None:
    # Go sets Base.Probe.ProbeHandler = Merge.Probe.ProbeHandler whenever both probes are non-nil.
    assert merge.build_container({"livenessProbe": LIVEZ}, {"livenessProbe": {"periodSeconds": 5}}) == {
        "livenessProbe": {"failureThreshold": 6, "periodSeconds": 5}}


def test_build_pod_template_concatenates_containers() -> None:
    # pod_template_test.go "containers"
    base = {"initContainers": [{"name": "foo"}], "containers": [{"name": "foo"}]}
    got = merge.build_pod_template("", "", {}, {}, base,
                                   {"initContainers": [{"name": "bar"}], "containers": [{"name": "bar"}]})
    assert got["spec"] == {"initContainers": [{"name": "foo"}, {"name": "bar"}],
                           "containers": [{"name": "foo"}, {"name": "bar"}]}
    same = merge.build_pod_template("", "", {}, {}, {"containers": [{"name": "x", "image": "a"}]},
                                    {"containers": [{"name": "x", "image": "b"}]})
    assert same["spec"]["containers"] == [{"name": "x", "image": "a"}, {"name": "x", "image": "b"}]


def test_merge_lists_by_key_with_new_items_first() -> None:
    base = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "volumeMounts": [{"name": "etc", "mountPath": "/etc/slurm", "readOnly": True}]}
    user = {"env": [{"name": "C", "value": "3"}, {"name": "A", "value": "9"}],
            "volumeMounts": [{"name": "x", "mountPath": "/x"}, {"name": "etc2", "mountPath": "/etc/slurm"}]}
    got = merge.build_container(base, user)
    assert got["env"] == [{"name": "C", "value": "3"}, {"name": "A", "value": "9"}, {"name": "B", "value": "2"}]
    assert got["volumeMounts"] == [{"name": "x", "mountPath": "/x"},
                                   {"name": "etc2", "mountPath": "/etc/slurm", "readOnly": True}]


def test_patch_empties_do_not_clear_and_atomic_lists_are_replaced() -> None:
    base = {"tolerations": [{"key": "a"}], "nodeSelector": {"a": "1"}, "dnsConfig": {"searches": ["s1"]},
            "automountServiceAccountToken": False, "hostname": "h"}
    user = {"tolerations": [{"key": "b"}], "nodeSelector": {"b": "2"}, "dnsConfig": {"searches": ["s2"]},
            "hostname": "", "subdomain": None, "volumes": []}
    spec = merge.build_pod_template("n", "ns", {}, {}, base, user)["spec"]
    assert spec == {"tolerations": [{"key": "b"}], "nodeSelector": {"a": "1", "b": "2"},
                    "dnsConfig": {"searches": ["s2"]}, "automountServiceAccountToken": False, "hostname": "h"}


def test_merge_slice_of_scalars() -> None:
    # patch.go mergeSlice for scalar lists: deduplicated, patch items first.
    meta = merge.Field(True, None)
    assert merge.merge_slice(["a", "b"], ["c", "a"], meta) == ["c", "a", "b"]


# --- labels_test.go TestNewBuilder -----------------------------------------------------------------------------

OBJ = {"metadata": {"name": "test"}, "spec": {"controllerRef": {"name": "slurm"}}}


@pytest.mark.parametrize(("fn", "want"), [
    (labels.controller_selector_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmctld"}),
    (labels.controller_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmctld",
                                "app.kubernetes.io/component": "controller"}),
    (labels.restapi_selector_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmrestd"}),
    (labels.restapi_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmrestd",
                             "app.kubernetes.io/component": "restapi"}),
    (labels.accounting_selector_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmdbd"}),
    (labels.accounting_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmdbd",
                                "app.kubernetes.io/component": "accounting"}),
    (labels.worker_selector_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmd"}),
    (labels.worker_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "slurmd",
                            "app.kubernetes.io/component": "worker", "slinky.slurm.net/cluster": "slurm"}),
    (labels.login_selector_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "login"}),
    (labels.login_labels, {"app.kubernetes.io/instance": "test", "app.kubernetes.io/name": "login",
                           "app.kubernetes.io/component": "login"}),
])
def test_labels(fn: Any, want: dict[str, str]) -> None:
    assert fn(OBJ) == want


def test_pod_protect_and_worker_service_selector() -> None:
    assert labels.pod_protect_labels() == {"nodeset.slinky.slurm.net/pod-protect": "true"}
    assert labels.worker_service_selector("slurm") == {"app.kubernetes.io/name": "slurmd",
                                                       "slinky.slurm.net/cluster": "slurm"}
