"""The in-cluster reconcile of Slurm accounts, users and QoS: after each `pulumi up` that changes them, a Job in
the `slurm` namespace runs `python3 -m slurm.accounts apply` (slurm/accounts/, standard library only) against
slurmdbd with the real sacctmgr.

Objects: a ConfigMap with the desired document (what `slurm-eks plan`/`diff` show a reviewer), a ConfigMap
with the package's source files, and a Job whose name carries a hash of both, so a changed document or
reconcile is a new Job (Pulumi replaces it) and an unchanged one runs nothing. Pulumi owns the Job's
lifetime (no ttlSecondsAfterFinished: a Job the TTL controller deleted would be re-created by the next
`pulumi up --refresh`); the last run's log stays readable with `kubectl logs -n slurm job/<name>`.

The pod is a Slurm client the way Slinky's login pods are (SlinkyProject/slurm-operator v1.2.1
internal/builder/loginbuilder/login_app.go): the login image, sackd fetching the configuration from
slurmctld (`--conf-server <controller>-controller.<namespace>:6817`, common.ConfiglessArgs) and signing
requests with the Controller's slurm.key (its slurmKeyRef Secret). In Slurm 25.11 client commands always
get their credentials from a sack socket (SchedMD/slurm slurm-25-11-6-1 src/plugins/auth/slurm/external.c
`create_external` -> `sack_create`), which sackd serves at /run/slurm/sack.socket once it has the
configuration (src/sackd/sackd.c `main`); `SLURM_SACK_KEY` names the key file (src/plugins/auth/slurm/
internal.c `init_internal`), which must not be readable by others (`_check_key_permissions`). It runs as
root, which slurmdbd treats as an administrator (src/slurmdbd/proc_req.c `_validate_super_user`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import slurm.accounts
from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.catalog import Resources
from components.config.cluster import ClusterConfig
from components.names import SLURM_NAMESPACE
from components.slinky import specs
from components.slinky.accounts_document import desired_json
from components.slinky.images import slurm_image

DOCUMENT_CONFIG_MAP = "slurm-eks-accounts"
POD_LABELS = {"app.kubernetes.io/name": "slurm-eks-accounts"}
CODE_CONFIG_MAP = "slurm-eks-accounts-code"
DOCUMENT = "desired.json"
# The reconcile ships as source files in a ConfigMap; imported so the dependency shows in the import graph.
PACKAGE = Path(slurm.accounts.__file__).parent
CODE_ROOT = "/opt/slurm-eks"  # the package is mounted at CODE_ROOT/slurm/accounts
DOCUMENT_DIR = "/etc/slurm-eks/accounts"
KEY_DIR = "/etc/slurm-eks/key"
CONTROLLER_ADDRESS = f"{specs.CONTROLLER}-controller.{SLURM_NAMESPACE}:6817"  # Controller.ServiceFQDNShort
SACK_SOCKET = "/run/slurm/sack.socket"  # sackd's RUNTIME_DIRECTORY default, Slinky's login readiness probe
SACKD_WAIT_S = 120  # slurmctld may still be starting right after the first `pulumi up`
# Kubernetes retries a failed pod with back-off 10 s, 20 s, 40 s, ... (capped at 6 min): 6 retries wait
# 10.5 min in all, so slurmctld and slurmdbd have about 25 minutes to come up before the Job fails.
BACKOFF_LIMIT = 6
# pulumi-kubernetes waits for a Job to complete (and fails `pulumi up` when it fails), 10 minutes by default;
# `pulumi.com/replaceUnready` makes the next `pulumi up` run a failed Job again instead of waiting on it
# (pulumi-kubernetes docs, batch/v1 Job).
AWAIT = pulumi.CustomTimeouts(create="30m", update="30m")
RETRY_ANNOTATIONS = {"pulumi.com/replaceUnready": "true"}
RESOURCES = Resources(250, 256)
# sackd first, then the client (bash -c): shared with the repair controller (components/lifecycle/node_repair.py).
SACKD_START = f"""set -euo pipefail
sackd --conf-server {CONTROLLER_ADDRESS} --disable-reconfig
for _ in $(seq {SACKD_WAIT_S // 2}); do [ -S {SACK_SOCKET} ] && break; sleep 2; done
[ -S {SACK_SOCKET} ] || {{ echo "no configuration from {CONTROLLER_ADDRESS} in {SACKD_WAIT_S} s" >&2; exit 1; }}
"""
SCRIPT = f"{SACKD_START}exec python3 -m slurm.accounts apply --desired {DOCUMENT_DIR}/{DOCUMENT}\n"
KEY_MOUNT = {"name": "slurm-key", "mountPath": KEY_DIR, "readOnly": True}
KEY_VOLUME = {"name": "slurm-key", "secret": {"secretName": specs.SLURM_KEY.name, "defaultMode": 0o400,
                                               "items": [{"key": specs.SLURM_KEY.key, "path": specs.SLURM_KEY.key}]}}


def package_files() -> dict[str, str]:
    """The reconcile's source files by name (a ConfigMap key cannot hold a '/')."""
    return {path.name: path.read_text() for path in sorted(PACKAGE.glob("*.py"))}


def job_name(document: str, code: dict[str, str]) -> str:
    digest = hashlib.sha256(document.encode())
    for name, text in sorted(code.items()):
        digest.update(f"\0{name}\0{text}".encode())
    return f"{DOCUMENT_CONFIG_MAP}-{digest.hexdigest()[:10]}"


def client_container(config: ClusterConfig, name: str, script: str, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """A Slurm client container on the login image running `script` (after SACKD_START) with the slurm.key, the
    code under CODE_ROOT (a volume named `code`) and `mounts`."""
    return {
        "name": name,
        "image": slurm_image(config.slurm, "login"),
        "command": ["bash", "-c", script],
        "env": [{"name": "SLURM_SACK_KEY", "value": f"{KEY_DIR}/{specs.SLURM_KEY.key}"},
                {"name": "PYTHONPATH", "value": CODE_ROOT},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": specs.guaranteed(RESOURCES),
        "volumeMounts": [KEY_MOUNT, *mounts, {"name": "code", "mountPath": CODE_ROOT, "readOnly": True}],
    }


def job_spec(config: ClusterConfig, code: dict[str, str]) -> dict[str, Any]:
    """The Job's `spec`: one pod on the system nodes, the login image, the key, the document and the code."""
    code_items = [{"key": name, "path": f"slurm/accounts/{name}"} for name in sorted(code)]
    return {
        "backoffLimit": BACKOFF_LIMIT,
        # The Job's name changes with its content (job_name); this label does not, so the deploy check knows its
        # pods (scripts/checks/pod_flows.py) whatever the name.
        "template": {"metadata": {"labels": dict(POD_LABELS)}, "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "containers": [client_container(config, "reconcile", SCRIPT, [
                {"name": "document", "mountPath": DOCUMENT_DIR, "readOnly": True}])],
            "volumes": [KEY_VOLUME, {"name": "document", "configMap": {"name": DOCUMENT_CONFIG_MAP}},
                        {"name": "code", "configMap": {"name": CODE_CONFIG_MAP, "items": code_items}}],
        }},
    }


def accounts_reconcile(name: str, parent: pulumi.Resource, provider: k8s.Provider, config: ClusterConfig,
                       cluster_name: str, depends_on: list[pulumi.Resource]) -> list[pulumi.Resource]:
    """The two ConfigMaps and the Job, children of `parent`. `depends_on`: the Controller and Accounting
    objects and the slurm.key Secret. Made for every stack, also one that declares no accounts, so a stack
    that drops its last account still gets it removed."""
    document = desired_json(config, cluster_name)
    code = package_files()

    def options(after: list[pulumi.Resource], timeouts: pulumi.CustomTimeouts | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=after, custom_timeouts=timeouts)

    def metadata(object_name: str, **more: Any) -> dict[str, Any]:
        return {"name": object_name, "namespace": SLURM_NAMESPACE, **more}

    config_maps = [
        k8s.core.v1.ConfigMap(f"{name}-accounts", metadata=metadata(DOCUMENT_CONFIG_MAP),
                              data={DOCUMENT: document}, opts=options(depends_on)),
        k8s.core.v1.ConfigMap(f"{name}-accounts-code", metadata=metadata(CODE_CONFIG_MAP), data=code,
                              opts=options(depends_on)),
    ]
    job = k8s.batch.v1.Job(f"{name}-accounts-reconcile",
                           metadata=metadata(job_name(document, code), annotations=RETRY_ANNOTATIONS),
                           spec=job_spec(config, code), opts=options([*depends_on, *config_maps], AWAIT))
    return [*config_maps, job]
