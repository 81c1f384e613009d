"""The in-cluster reconcile of Slurm accounts, users and QoS: after each `pulumi up` that changes them, a Job in
the `slurm` namespace runs the accounts agent (`python3 -m slurm.agent accounts`, slurm/agent/accounts/) of the
slurm-eks agent image (components/slinky/agent_image.py) against slurmdbd with the real sacctmgr.

Objects: a ConfigMap with the desired document (slurm/agent/contract.py AccountsDocument: what `slurm-eks
plan`/`diff` show a reviewer) and a Job whose name carries a hash of the document and of the image's build inputs,
so a changed document or agent is a new Job (Pulumi replaces it) and an unchanged one runs nothing. Pulumi owns
the Job's lifetime (no ttlSecondsAfterFinished: a Job the TTL controller deleted would be re-created by the next
`pulumi up --refresh`); the last run's log stays readable with `kubectl logs -n slurm job/<name>`.

The pod is a Slurm client the way Slinky's login pods are (SlinkyProject/slurm-operator v1.2.1
internal/builder/loginbuilder/login_app.go): sackd fetching the configuration from slurmctld
(`--conf-server <controller>-controller.<namespace>:6817`, common.ConfiglessArgs) and signing requests with the
Controller's slurm.key (its slurmKeyRef Secret); the agent starts sackd itself (slurm/agent/sackd.py). It runs as
SlurmUser (uid 401), which slurmdbd treats as an administrator (SchedMD/slurm slurm-25.11 src/slurmdbd/
proc_req.c `_validate_super_user`: root or SlurmUser), never as root.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.catalog import Resources
from components.config.cluster import ClusterConfig
from components.names import SLURM_NAMESPACE
from components.slinky import specs
from components.slinky.accounts_document import desired_json
from components.slinky.agent_image import AgentImage
from slurm.agent import contract

DOCUMENT_CONFIG_MAP = "slurm-eks-accounts"
POD_LABELS = {"app.kubernetes.io/name": "slurm-eks-accounts", **contract.AGENT_POD_LABELS}
DOCUMENT_DIR = "/etc/slurm-eks/accounts"
KEY_DIR = "/etc/slurm-eks/key"
CONTROLLER_ADDRESS = f"{specs.CONTROLLER}-controller.{SLURM_NAMESPACE}:6817"  # Controller.ServiceFQDNShort
# Kubernetes retries a failed pod with back-off 10 s, 20 s, 40 s, ... (capped at 6 min): 6 retries wait
# 10.5 min in all, so slurmctld and slurmdbd have about 25 minutes to come up before the Job fails.
BACKOFF_LIMIT = 6
# pulumi-kubernetes waits for a Job to complete (and fails `pulumi up` when it fails), 10 minutes by default;
# `pulumi.com/replaceUnready` makes the next `pulumi up` run a failed Job again instead of waiting on it
# (pulumi-kubernetes docs, batch/v1 Job).
AWAIT = pulumi.CustomTimeouts(create="30m", update="30m")
RETRY_ANNOTATIONS = {"pulumi.com/replaceUnready": "true"}
RESOURCES = Resources(250, 256)
KEY_MOUNT = {"name": "slurm-key", "mountPath": KEY_DIR, "readOnly": True}
# 0440 with the pod's fsGroup (the agent's gid): readable to the agent, and to no other (Slurm refuses a key
# others may read: src/plugins/auth/slurm/internal.c `_check_key_permissions`).
KEY_VOLUME = {"name": "slurm-key", "secret": {"secretName": specs.SLURM_KEY.name, "defaultMode": 0o440,
                                               "items": [{"key": specs.SLURM_KEY.key, "path": specs.SLURM_KEY.key}]}}
# sackd's runtime directory (its socket and the fetched configuration): the root file system is read-only.
RUN_DIR = "/run/slurm"
RUN_MOUNT = {"name": "sackd-run", "mountPath": RUN_DIR}
RUN_VOLUME = {"name": "sackd-run", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}
# The agent's pod: its user and group, never root, no privilege to gain (Pod Security `restricted`).
POD_SECURITY = {"runAsUser": contract.AGENT_UID, "runAsGroup": contract.AGENT_UID, "runAsNonRoot": True,
                "fsGroup": contract.AGENT_UID, "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "capabilities": {"drop": ["ALL"]}}


def job_name(document: str, image: AgentImage) -> str:
    digest = hashlib.sha256(document.encode())
    digest.update(f"\0{image.identity}".encode())
    return f"{DOCUMENT_CONFIG_MAP}-{digest.hexdigest()[:10]}"


def agent_container(image: AgentImage, name: str, args: list[str], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """A container of the agent image running `<agent> --conf-server <slurmctld> <args>` (the image's ENTRYPOINT
    is `python3 -m slurm.agent`) with the slurm.key, sackd's runtime directory and `mounts`."""
    return {
        "name": name,
        "image": image.reference,
        "args": [*args[:1], contract.CONF_SERVER_OPTION, CONTROLLER_ADDRESS, *args[1:]],
        "env": [{"name": "SLURM_SACK_KEY", "value": f"{KEY_DIR}/{specs.SLURM_KEY.key}"}],
        "resources": specs.guaranteed(RESOURCES),
        "securityContext": CONTAINER_SECURITY,
        "volumeMounts": [KEY_MOUNT, RUN_MOUNT, *mounts],
    }


def job_spec(image: AgentImage) -> dict[str, Any]:
    """The Job's `spec`: one pod on the system nodes, the agent image, the key and the document."""
    return {
        "backoffLimit": BACKOFF_LIMIT,
        # The Job's name changes with its content (job_name); this label does not, so the deploy check knows its
        # pods (scripts/checks/pod_flows.py) whatever the name.
        "template": {"metadata": {"labels": dict(POD_LABELS)}, "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "securityContext": POD_SECURITY,
            "containers": [agent_container(image, "reconcile", [
                contract.ACCOUNTS_AGENT, contract.DESIRED_OPTION, f"{DOCUMENT_DIR}/{contract.ACCOUNTS_FILE}"],
                [{"name": "document", "mountPath": DOCUMENT_DIR, "readOnly": True}])],
            "volumes": [KEY_VOLUME, RUN_VOLUME, {"name": "document", "configMap": {"name": DOCUMENT_CONFIG_MAP}}],
        }},
    }


def accounts_reconcile(name: str, parent: pulumi.Resource, provider: k8s.Provider, config: ClusterConfig,
                       cluster_name: str, image: AgentImage,
                       depends_on: list[pulumi.Resource]) -> list[pulumi.Resource]:
    """The ConfigMap and the Job, children of `parent`. `depends_on`: the Controller and Accounting objects and
    the slurm.key Secret. Made for every stack, also one that declares no accounts, so a stack that drops its
    last account still gets it removed."""
    document = desired_json(config, cluster_name)

    def options(after: list[pulumi.Resource], timeouts: pulumi.CustomTimeouts | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=after, custom_timeouts=timeouts)

    def metadata(object_name: str, **more: Any) -> dict[str, Any]:
        return {"name": object_name, "namespace": SLURM_NAMESPACE, **more}

    config_map = k8s.core.v1.ConfigMap(f"{name}-accounts", metadata=metadata(DOCUMENT_CONFIG_MAP),
                                       data={contract.ACCOUNTS_FILE: document}, opts=options(depends_on))
    job = k8s.batch.v1.Job(f"{name}-accounts-reconcile",
                           metadata=metadata(job_name(document, image), annotations=RETRY_ANNOTATIONS),
                           spec=job_spec(image), opts=options([*depends_on, config_map], AWAIT))
    return [config_map, job]
