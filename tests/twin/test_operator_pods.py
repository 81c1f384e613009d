"""The Controller, LoginSet, RestApi and Accounting pods and Services as slurm-operator v1.2.1 builds them: the Go
tests' cases (restapibuilder/restapi_app_test.go, loginbuilder/login_app_test.go, controllerbuilder/
controller_app_test.go, accountingbuilder/accounting_app_test.go) and the shipped plans, whose NetworkPolicies
select these pods by app.kubernetes.io/name."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.twin.cluster import require_image
from scripts.twin.errors import TwinError
from scripts.twin.operator import accounting, controller, login, restapi, services
from scripts.twin.operator.etcfiles import EtcFile, accounting_etc_files, login_etc_files, restapi_etc_files
from scripts.twin.operator.model import PodPlan
from scripts.twin.operator.worker import nodeset_pod
from tests.plan.fixtures import shipped_plan
from tests.twin.operator_plan import slinky


def obj(kind: str, name: str = "slurm", **spec: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "namespace": "slurm"}, "spec": spec}


CONTROLLER = obj("Controller", slurmKeyRef={"name": "auth-slurm", "key": "slurm.key"},
                 jwtKeyRef={"name": "auth-jwt", "key": "jwt.key"})


# --- restapi_app_test.go ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("ctl", "want"), [
    (CONTROLLER, ("-s", "openapi/slurmctld", "0.0.0.0:6820")),
    ({**CONTROLLER, "spec": {**CONTROLLER["spec"], "accountingRef": {"name": "slurm"}}}, ("0.0.0.0:6820",)),
])
def test_slurmrestd_args(ctl: dict[str, Any], want: tuple[str, ...]) -> None:
    pod = restapi.restapi_pods(obj("RestApi", controllerRef={"name": "slurm"}), ctl)[0]
    c = pod.containers[0]
    assert (c.name, c.ports[0].name, c.ports[0].container_port) == ("slurmrestd", "slurmrestd", 6820)
    assert c.args == want
    assert (c.security_context["runAsNonRoot"], c.security_context["runAsUser"],
            c.security_context["runAsGroup"]) == (True, 65534, 65534)
    assert c.env_value("SLURM_JWT") == "daemon"
    assert c.env_value("SLURMRESTD_SECURITY") == "disable_unshare_files,disable_unshare_sysv"


def test_user_args_come_before_the_listen_address() -> None:
    pod = restapi.restapi_pods(obj("RestApi", slurmrestd={"args": ["-vv"]}), CONTROLLER)[0]
    assert pod.containers[0].args == ("-s", "openapi/slurmctld", "-vv", "0.0.0.0:6820")


# --- login_app_test.go -----------------------------------------------------------------------------------------


def test_login_pod_envars_and_port() -> None:
    loginset = obj("LoginSet", controllerRef={"name": "slurm"},
                   login={"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]})
    pod = login.login_pods(loginset, CONTROLLER)[0]
    c = pod.container("login")
    assert [e.name for e in c.env] == ["A", "B", "SACKD_OPTIONS"]
    assert c.env_value("SACKD_OPTIONS") == "--conf-server slurm-controller.slurm:6817"
    assert [(p.name, p.container_port) for p in c.ports] == [("login", 22)]
    assert pod.dns_searches == ("slurm-workers-slurm.slurm.svc.cluster.local",)
    assert {"app.kubernetes.io/name": "login", "app.kubernetes.io/instance": "slurm"}.items() <= pod.labels.items()


def test_login_pod_custom_ssh_port() -> None:
    loginset = obj("LoginSet", controllerRef={"name": "slurm"},
                   login={"ports": [{"name": "login", "containerPort": 33, "protocol": "TCP"}]})
    c = login.login_pods(loginset, CONTROLLER)[0].container("login")
    assert [(p.name, p.container_port) for p in c.ports] == [("login", 33)]


def test_login_ssh_config() -> None:
    data = login.login_ssh_config_data(obj("LoginSet", extraSshdConfig="PermitRootLogin no",
                                           rootSshAuthorizedKeys="ssh-ed25519 AAAA"))
    assert data["sshd_config"] == ("#\n### GENERAL ###\nInclude /etc/ssh/sshd_config.d/*.conf\nUsePAM yes\n"
                                   "X11Forwarding yes\nSubsystem sftp internal-sftp\n#\n### EXTRA CONFIG ###\n"
                                   "PermitRootLogin no\n")
    assert data["authorized_keys"] == "#\n### SLINKY ###\nssh-ed25519 AAAA\n"


# --- controller / accounting -----------------------------------------------------------------------------------


def test_controller_pod_without_persistence_or_reconfigure() -> None:
    ctl = {**CONTROLLER, "spec": {**CONTROLLER["spec"], "persistence": {"enabled": False}}}
    pod = controller.controller_pod(ctl)
    assert (pod.name, pod.hostname, pod.subdomain) == ("slurm-controller-0", "slurm-controller-0", "slurm-controller")
    assert [c.name for c in pod.init_containers] == ["logfile"]
    c = pod.container("slurmctld")
    assert (c.command, c.args) == ((), ())
    assert (c.ports[0].name, c.ports[0].container_port) == ("slurmctld", 6817)
    assert c.security_context == {"runAsNonRoot": True, "runAsUser": 401, "runAsGroup": 401}
    assert pod.volume("statesave").source == {"emptyDir": {}}
    assert pod.volumes[-1].name == "statesave"
    assert [m.mount_path for m in c.volume_mounts] == ["/etc/slurm", "/run", "/var/spool/slurmctld/slurm_slurm",
                                                      "/run/slurmctld", "/var/log/slurm"]


def test_controller_existing_claim() -> None:
    ctl = {**CONTROLLER, "spec": {**CONTROLLER["spec"], "persistence": {"existingClaim": "state"}}}
    assert controller.controller_pod(ctl).volume("statesave").source == {
        "persistentVolumeClaim": {"claimName": "state"}}


def test_accounting_pod_ignores_template_metadata() -> None:
    acc = obj("Accounting", slurmKeyRef={"name": "auth-slurm", "key": "slurm.key"},
              template={"metadata": {"labels": {"x": "y"}}})
    pod = accounting.accounting_pod(acc)
    assert "x" not in pod.labels
    assert (pod.name, pod.hostname, pod.subdomain) == ("slurm-accounting-0", "slurm-accounting-0", "slurm-accounting")
    c = pod.container("slurmdbd")
    assert (c.ports[0].name, c.ports[0].container_port, c.security_context["runAsUser"]) == ("slurmdbd", 6819, 401)


# --- the shipped plans ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["prod", "dev"])
def stack(request: pytest.FixtureRequest) -> str:
    return request.param


def stack_pods(stack: str) -> dict[str, PodPlan]:
    s = slinky(stack)
    pods = {
        "controller": controller.controller_pod(s.controller),
        "login": login.login_pods(s.one("LoginSet"), s.controller)[0],
        "restapi": restapi.restapi_pods(s.one("RestApi"), s.controller)[0],
        "accounting": accounting.accounting_pod(s.accounting),
    }
    pods.update({f"nodeset/{n['metadata']['name']}": nodeset_pod(n, s.controller) for n in s.nodesets})
    return pods


def _matches(selector: dict[str, Any], pod_labels: dict[str, str]) -> bool:
    if any(pod_labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or ():
        value = pod_labels.get(expr["key"])
        op = expr["operator"]
        if (op == "In" and value not in expr["values"]) or (op == "NotIn" and value in expr["values"]) \
                or (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return True


def test_network_policies_select_the_operator_pods(stack: str) -> None:
    s = slinky(stack)
    pods = stack_pods(stack)
    by_app = {"slurmctld": "controller", "login": "login", "slurmrestd": "restapi", "slurmdbd": "accounting"}
    policies = [p for p in s.of_kind("NetworkPolicy") if p["metadata"]["namespace"] == "slurm"]
    for app, key in by_app.items():
        assert pods[key].labels["app.kubernetes.io/name"] == app
        policy = next(p for p in policies if p["metadata"]["name"] == app)
        assert _matches(policy["spec"]["podSelector"], dict(pods[key].labels))
    for key, pod in pods.items():
        if key.startswith("nodeset/"):
            policy = next(p for p in policies if p["metadata"]["name"] == "slurmd")
            assert _matches(policy["spec"]["podSelector"], dict(pod.labels))
    # Every app.kubernetes.io/name the slurm namespace's policies name for a Slurm daemon is one the operator sets.
    named = {e["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
             for p in policies for rule in (*p["spec"].get("ingress", []), *p["spec"].get("egress", []))
             for e in (rule.get("from") or rule.get("to") or [])
             if "app.kubernetes.io/name" in (e.get("podSelector") or {}).get("matchLabels", {})}
    produced = {pod.labels["app.kubernetes.io/name"] for pod in pods.values()}
    assert named & {"slurmctld", "slurmd", "login", "slurmrestd", "slurmdbd"} <= produced


def test_stack_controller_pod(stack: str) -> None:
    s = slinky(stack)
    pod = stack_pods(stack)["controller"]
    spec = s.controller["spec"]
    assert (pod.name, pod.hostname, pod.subdomain) == ("slurm-controller-0", "slurm-controller-0", "slurm-controller")
    inits = (["reconfigure"] if spec.get("inplaceReconfigure") else []) + ["logfile"] + [
        c["name"] for c in spec["template"]["spec"].get("initContainers", [])]
    assert [c.name for c in pod.init_containers] == inits
    c = pod.container("slurmctld")
    assert c.image == spec["slurmctld"]["image"]
    assert ("/var/spool/slurmctld/" + spec["clusterName"]) in [m.mount_path for m in c.volume_mounts]
    assert pod.volumes[0].source == {"persistentVolumeClaim": {"claimName": "statesave-slurm-controller-0"}}
    etc = pod.volume("slurm-etc").source["projected"]
    assert etc["defaultMode"] == 0o610
    assert [src.get("configMap", src.get("secret"))["name"] for src in etc["sources"]][:3] == [
        "slurm-config", "slurm-auth-slurm", "slurm-auth-jwt"]
    assert pod.annotations["kubectl.kubernetes.io/default-container"] == "slurmctld"
    assert pod.node_selector == spec["template"]["spec"]["nodeSelector"]


def test_stack_login_pod(stack: str) -> None:
    s = slinky(stack)
    loginset = s.one("LoginSet")
    pods = login.login_pods(loginset, s.controller)
    assert [p.name for p in pods] == [f"slurm-{i}" for i in range(loginset["spec"].get("replicas", 1))]
    pod = pods[0]
    assert pod.init_containers[0].name == "initconf"
    c = pod.container("login")
    assert c.env_value("SACKD_OPTIONS") == "--conf-server slurm-controller.slurm:6817"
    assert c.image == loginset["spec"]["login"]["image"]
    assert login_etc_files(loginset, s.controller) == {
        "slurm.key": EtcFile("Secret", "slurm-auth-slurm", "slurm.key", 0o600)}
    svc = services.login_service(loginset)
    assert (svc.name, svc.type, [(p.name, p.port, p.target_port) for p in svc.ports]) == (
        "slurm", loginset["spec"]["service"]["spec"]["type"], [("login", 22, "login")])
    assert svc.selector.items() <= pod.labels.items()


def test_stack_restapi_and_accounting(stack: str) -> None:
    s = slinky(stack)
    rest = s.one("RestApi")
    pods = restapi.restapi_pods(rest, s.controller)
    assert [p.name for p in pods] == [f"slurm-restapi-{i}" for i in range(rest["spec"].get("replicas", 1))]
    assert pods[0].container("slurmrestd").args == ("0.0.0.0:6820",)  # the Controller has an accountingRef
    assert restapi_etc_files(s.controller) == {
        "slurm.conf": EtcFile("ConfigMap", "slurm-config", "slurm.conf", 0o600, generated=True),
        "slurm.key": EtcFile("Secret", "slurm-auth-slurm", "slurm.key", 0o600)}
    acc = accounting.accounting_pod(s.accounting)
    assert acc.container("slurmdbd").image == s.accounting["spec"]["slurmdbd"]["image"]
    assert accounting_etc_files(s.accounting) == {
        "slurmdbd.conf": EtcFile("Secret", "slurm-accounting", "slurmdbd.conf", 0o600, generated=True),
        "slurm.key": EtcFile("Secret", "slurm-auth-slurm", "slurm.key", 0o600),
        "jwt.key": EtcFile("Secret", "slurm-auth-jwt", "jwt.key", 0o600)}
    for svc, pod, port in ((services.restapi_service(rest), pods[0], ("slurmrestd", 6820)),
                           (services.accounting_service(s.accounting), acc, ("slurmdbd", 6819)),
                           (services.controller_service(s.controller), stack_pods(stack)["controller"],
                            ("slurmctld", 6817))):
        assert svc.selector.items() <= pod.labels.items()
        assert [(p.name, p.port) for p in svc.ports] == [port]
        assert not svc.headless
    assert services.controller_service(s.controller).fqdn_short == "slurm-controller.slurm"


def test_initconf_has_no_image_unless_the_loginset_gives_one() -> None:
    # v1.2.1 sets no image on initconf (its Helm chart passes alpine); the shipped LoginSets give it the login image.
    bare = login.login_pods(obj("LoginSet", controllerRef={"name": "slurm"}), CONTROLLER)[0]
    assert bare.container("initconf").image == ""
    given = obj("LoginSet", controllerRef={"name": "slurm"}, initconf={"image": "alpine:3"})
    initconf = login.login_pods(given, CONTROLLER)[0].container("initconf")
    assert (initconf.image, initconf.command[:2]) == ("alpine:3", ("sh", "-c"))
    assert [(m.name, m.mount_path, m.read_only) for m in initconf.volume_mounts] == [
        ("slurm-etc", "/mnt/etc/slurm", False), ("slurm-config", "/mnt/slurm", True)]


def test_hash_annotations_sit_under_the_default_container_annotation() -> None:
    ctl = {**CONTROLLER, "metadata": {**CONTROLLER["metadata"], "annotations": {"a": "object"}},
           "spec": {**CONTROLLER["spec"], "template": {"metadata": {"annotations": {"a": "template", "b": "t"}}}}}
    pod = controller.controller_pod(ctl, {"b": "hash", "kubectl.kubernetes.io/default-container": "x"})
    assert pod.annotations == {"a": "template", "b": "hash", "kubectl.kubernetes.io/default-container": "slurmctld"}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_container_of_the_shipped_login_pods_has_an_image(stack: str) -> None:
    """Else the API server refuses the pod (the twin says so, as scripts/twin/cluster.py require_image)."""
    plan = shipped_plan(stack)
    (loginset,) = [m for m in plan.manifests() if m["kind"] == "LoginSet"]
    (controller,) = [m for m in plan.manifests() if m["kind"] == "Controller"]
    pod = login.login_pods(loginset, controller)[0]
    for container in (*pod.init_containers, *pod.containers):
        require_image(pod, container)
    bare = login.login_pods(obj("LoginSet", controllerRef={"name": "slurm"}), CONTROLLER)[0]
    with pytest.raises(TwinError, match="initconf has no image"):
        require_image(bare, bare.container("initconf"))
