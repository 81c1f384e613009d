"""NodeSet pods (slurmd) as the operator's NodeSet controller creates them.

Ports of slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go (BuildWorkerPodTemplate,
nodesetVolumes, slurmdContainer, slurmdArgs, slurmdConfArgs, getResourceLimits) and
internal/controller/nodeset/utils/utils.go (NewNodeSetStatefulSetPod, NewNodeSetDaemonSetPod, initIdentity,
UpdateIdentity, UpdateStorage, updateNodeSetPodAntiAffinity, GetSlurmNodeName).

slurmd runs `-Z --conf-server <controller svc>.<ns>:6817 --conf '<Features=...> ...'` (dynamic node,
configless); the single quotes are part of the argument (no shell runs it). Its /etc/slurm holds slurm.key
only; slurm.conf and the rest come from slurmctld (configless).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.common import (
    container_resource_limits,
    layered,
    logfile_container,
    pod_resource_limits,
    secret_projection,
    template_metadata,
    template_spec,
)
from scripts.twin.operator.labels import worker_labels
from scripts.twin.operator.merge import build_container, build_pod_template
from scripts.twin.operator.model import PodPlan, pod_from_spec
from scripts.twin.operator.names import (
    configless_args,
    controller_slurm_key_ref,
    daemonset_pod_hostname,
    name_of,
    namespace_of,
    nodeset_controller_name,
    nodeset_pod_name,
    nodeset_scaling_mode,
    nodeset_ssh_config_name,
    nodeset_sssd_ref,
    padded_ordinal,
    slurm_nodeset_name,
    spec_of,
    worker_service_fqdn,
    worker_service_name,
)

PRE_STOP_COMMAND = (
    "/usr/bin/sh",
    "-c",
    "scontrol update nodename=$(hostname) state=down reason='slurm-operator: Pod is terminating';",
)
"""slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go slurmdContainer: the slurmd preStop."""

# Unicode word-break classes for ASCII, as golang.org/x/text v0.39.0 cases/info.go groups them for title
# casing: letters, digits and '_' never break a word; MidLetter/MidNumLet/Single_Quote (':' '.' "'") break
# only when two follow each other; everything else breaks.
_MID = frozenset(":.'")


def go_title(s: str) -> str:
    """golang.org/x/text/cases Title(language.English).String, for the ASCII keys of a --conf item.

    The first cased letter of each word is upper-cased and the rest lower-cased ("RealMemory" -> "Realmemory",
    "gres" -> "Gres"); words break at characters other than letters, digits, '_' and single ':' '.' "'".
    (Port of cases/map.go titleCaser.Transform with the info.go word-break approximation.)
    """
    out: list[str] = []
    mid_word = False
    prev_mid = False
    for ch in s:
        if ch.isalpha():
            out.append(ch.lower() if mid_word else ch.upper())
            mid_word = True
            prev_mid = False
            continue
        out.append(ch)
        if ch in _MID:
            if prev_mid:
                mid_word = False
            prev_mid = True
        elif ch.isalnum() or ch == "_":
            prev_mid = False
        else:
            mid_word = False
            prev_mid = False
    return "".join(out)


def slurmd_conf_args(nodeset: Mapping[str, Any]) -> list[str]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go slurmdConfArgs.

    `["--conf", "'<k=v> <k=v> ...'"]`: Features=<Slurm NodeSet name> plus spec.extraConf split on single
    spaces; each key title-cased (go_title), Feature/Features merged into Features, a repeated key's values
    joined with ','; the `key=value` items sorted. An item without '=' (also the empty item a double or
    trailing space makes) panics the operator: ValueError here.
    """
    extra = str(spec_of(nodeset).get("extraConf") or "")
    name = slurm_nodeset_name(nodeset)
    conf: dict[str, str] = {"Features": name}
    for item in extra.split(" ") if extra else []:
        pair = item.split("=", 1)
        key = go_title(pair[0])
        if len(pair) != 2:
            raise ValueError(f"NodeSet {name_of(nodeset)}: malformed --conf item: {item!r} "
                             "(the operator panics on it)")
        if key in ("Features", "Feature"):
            key = "Features"
        conf[key] = f"{conf[key]},{pair[1]}" if key in conf else pair[1]
    items = sorted(f"{k}={v}" for k, v in conf.items())
    return ["--conf", "'" + " ".join(items) + "'"]


def slurmd_args(nodeset: Mapping[str, Any], controller: Mapping[str, Any]) -> list[str]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go slurmdArgs: `-Z`, ConfiglessArgs,
    slurmdConfArgs (the user's spec.slurmd.args follow, see slurmd_container)."""
    return ["-Z", *configless_args(controller), *slurmd_conf_args(nodeset)]


def resource_limits(nodeset: Mapping[str, Any]) -> tuple[int, int]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go getResourceLimits: (POD_CPUS,
    POD_MEMORY in MiB).

    The pod-level spec.template.spec.resources.limits, each overridden by spec.slurmd.resources.limits when
    that is non-zero; cpus rounded up to an integer (Quantity.Value: "500m" -> 1), memory in bytes
    (rounded up) then integer-divided by 1024*1024 (truncated: "1892Gi" -> 1937408, "1500Ki" -> 1).
    """
    spec = spec_of(nodeset)
    cpus, memory = pod_resource_limits(template_spec(nodeset))
    c_cpus, c_memory = container_resource_limits(spec.get("slurmd") or {})
    if c_cpus != 0:
        cpus = c_cpus
    if c_memory != 0:
        memory = c_memory
    mib = abs(memory) // 1024 // 1024  # Go's int64 division truncates toward zero
    return cpus, mib if memory >= 0 else -mib


def slurmd_env(nodeset: Mapping[str, Any]) -> list[dict[str, Any]]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go slurmdContainer Env: POD_TOPOLOGY
    from the pod's topology.slinky.slurm.net/spec annotation (a fieldRef), POD_CPUS, POD_MEMORY (MiB)."""
    cpus, memory = resource_limits(nodeset)
    return [
        {"name": "POD_TOPOLOGY", "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.annotations['{consts.ANNOTATION_NODE_TOPOLOGY_SPEC}']"}}},
        {"name": "POD_CPUS", "value": str(cpus)},
        {"name": "POD_MEMORY", "value": str(memory)},
    ]


def _ssh_enabled(nodeset: Mapping[str, Any]) -> bool:
    return bool((spec_of(nodeset).get("ssh") or {}).get("enabled"))


def slurmd_container(nodeset: Mapping[str, Any], controller: Mapping[str, Any]) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go slurmdContainer.

    Port slurmd 6818 (and ssh 22 with spec.ssh.enabled); startup/liveness GET /livez, readiness GET /readyz;
    privileged with BPF, NET_ADMIN, SYS_ADMIN, SYS_NICE; the preStop that downs the Slurm node; mounts
    /etc/slurm (ro) and /var/log/slurm (and sshd_config, sssd.conf with ssh); merged with spec.slurmd.
    """
    ssh = _ssh_enabled(nodeset)
    ports = [{"name": consts.WORKER_APP, "containerPort": consts.SLURMD_PORT, "protocol": "TCP"}]
    mounts = [
        {"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_DIR, "readOnly": True},
        {"name": consts.SLURM_LOGFILE_VOLUME, "mountPath": consts.SLURM_LOGFILE_DIR},
    ]
    if ssh:
        ports.append({"name": "ssh", "containerPort": consts.SSH_PORT, "protocol": "TCP"})
        mounts += [
            {"name": consts.SSH_CONFIG_VOLUME, "mountPath": consts.SSHD_CONFIG_FILE_PATH,
             "subPath": consts.SSHD_CONFIG_FILE, "readOnly": True},
            {"name": consts.SSSD_CONF_VOLUME, "mountPath": consts.SSSD_CONF_FILE_PATH,
             "subPath": consts.SSSD_CONF_FILE, "readOnly": True},
        ]
    base = {
        "name": consts.WORKER_APP,
        "args": slurmd_args(nodeset, controller),
        "env": slurmd_env(nodeset),
        "ports": ports,
        "startupProbe": {"httpGet": {"path": consts.SLURM_LIVEZ, "port": consts.WORKER_APP},
                         "failureThreshold": 6, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": consts.SLURM_LIVEZ, "port": consts.WORKER_APP},
                          "failureThreshold": 6, "periodSeconds": 10},
        "readinessProbe": {"httpGet": {"path": consts.SLURM_READYZ, "port": consts.WORKER_APP}},
        "securityContext": {"privileged": True,
                            "capabilities": {"add": ["BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE"]}},
        "lifecycle": {"preStop": {"exec": {"command": list(PRE_STOP_COMMAND)}}},
        "volumeMounts": mounts,
    }
    return build_container(base, spec_of(nodeset).get("slurmd"))


def nodeset_volumes(nodeset: Mapping[str, Any], controller: Mapping[str, Any]) -> list[dict[str, Any]]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go nodesetVolumes: slurm-etc (projected,
    0o600: the Controller's slurm.key only), slurm-logfile; with spec.ssh.enabled also ssh-config (the
    `<nodeset>-ssh-config` ConfigMap's sshd_config) and sssd-conf (spec.ssh.sssdConfRef as sssd.conf)."""
    out: list[dict[str, Any]] = [
        {"name": consts.SLURM_ETC_VOLUME, "projected": {"defaultMode": 0o600, "sources": [
            secret_projection(controller_slurm_key_ref(controller), consts.SLURM_KEY_FILE)]}},
        {"name": consts.SLURM_LOGFILE_VOLUME, "emptyDir": {"medium": "Memory"}},
    ]
    if _ssh_enabled(nodeset):
        sssd = nodeset_sssd_ref(nodeset)
        out += [
            {"name": consts.SSH_CONFIG_VOLUME, "projected": {"defaultMode": 0o600, "sources": [{"configMap": {
                "name": nodeset_ssh_config_name(nodeset),
                "items": [{"key": consts.SSHD_CONFIG_FILE, "path": consts.SSHD_CONFIG_FILE, "mode": 0o600}]}}]}},
            {"name": consts.SSSD_CONF_VOLUME, "projected": {"defaultMode": 0o600, "sources": [{"secret": {
                "name": sssd["name"],
                "items": [{"key": sssd["key"], "path": consts.SSSD_CONF_FILE, "mode": 0o600}]}}]}},
        ]
    return out


def worker_pod_template(
    nodeset: Mapping[str, Any], controller: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go BuildWorkerPodTemplate.

    Subdomain `slurm-workers-<controller>` with DNS search `slurm-workers-<controller>.<ns>.svc.cluster.local`
    (a template dnsConfig.searches replaces it), the worker-node toleration (template tolerations replace
    it), the logfile sidecar, no service-account token or service links. `hash_annotations`: the
    sshd-conf/sssd-conf hashes (hashes.worker_hash_annotations); None leaves them out.
    """
    spec = spec_of(nodeset)
    meta = template_metadata(nodeset)
    controller_name = nodeset_controller_name(nodeset)
    labels = layered(nodeset.get("metadata", {}).get("labels"), meta.get("labels"), worker_labels(nodeset))
    annotations = layered(nodeset.get("metadata", {}).get("annotations"), meta.get("annotations"),
                          hash_annotations, {consts.ANNOTATION_DEFAULT_CONTAINER: consts.WORKER_APP})
    base = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [slurmd_container(nodeset, controller)],
        "subdomain": worker_service_name(controller_name),
        "dnsConfig": {"searches": [worker_service_fqdn(controller_name, namespace_of(nodeset))]},
        "initContainers": [logfile_container(spec.get("logfile"), consts.SLURMD_LOGFILE_PATH)],
        "volumes": nodeset_volumes(nodeset, controller),
        "tolerations": [dict(consts.TOLERATION_WORKER_NODE)],
    }
    return build_pod_template(name_of(nodeset), namespace_of(nodeset), labels, annotations, base,
                              template_spec(nodeset))


def _anti_affinity(affinity: Mapping[str, Any] | None) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go updateNodeSetPodAntiAffinity: one
    slurmd pod per Kubernetes node (a required anti-affinity on app.kubernetes.io/name In [slurmd] by
    kubernetes.io/hostname), appended to the template's."""
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [
        {"key": consts.APP_LABEL, "operator": "In", "values": [consts.WORKER_APP]}]}}
    out = copy.deepcopy(dict(affinity or {}))
    anti = dict(out.get("podAntiAffinity") or {})
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = [
        *(anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []), term]
    out["podAntiAffinity"] = anti
    return out


def _update_storage(nodeset: Mapping[str, Any], volumes: list[dict[str, Any]], suffix: str) -> list[dict]:
    """slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go UpdateStorage/GetPersistentVolumeClaims:
    each spec.volumeClaimTemplates entry becomes a PVC volume `<claim>-<nodeset>-<suffix>` (suffix: the padded
    ordinal, or the hostname in DaemonSet mode), first (Go iterates a map there: sorted by name here), then the
    other volumes in order."""
    claims = {str((c.get("metadata") or {}).get("name") or ""): c for c in spec_of(nodeset).get("volumeClaimTemplates")
              or ()}
    new = [{"name": name, "persistentVolumeClaim": {"claimName": f"{name}-{name_of(nodeset)}-{suffix}"}}
           for name in sorted(claims)]
    return new + [v for v in volumes if v.get("name") not in claims]


def nodeset_pod(
    nodeset: Mapping[str, Any],
    controller: Mapping[str, Any],
    ordinal: int = 0,
    *,
    node_name: str = "",
    hostname_override: str = "",
    hash_annotations: Mapping[str, str] | None = None,
) -> PodPlan:
    """The NodeSet pod for `ordinal` (StatefulSet scaling, the default) or for Kubernetes node `node_name`
    (spec.scalingMode DaemonSet), per slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go
    NewNodeSetStatefulSetPod / NewNodeSetDaemonSetPod and initIdentity.

    StatefulSet mode: name `<nodeset>-<padded ordinal>`; hostname the template's spec.hostname + padded ordinal
    when set, else the pod name (this is the Slurm node name). DaemonSet mode: generate_name `<nodeset>-`,
    hostname GetDaemonSetPodHostname(node_name, hostname_override) (the node's
    nodeset.slinky.slurm.net/hostname-override annotation). Labels add nodeset.slinky.slurm.net/pod-name,
    pod-index (StatefulSet mode), pod-hostname and scaling-mode. Without spec.oversubscribeNode, a required
    pod anti-affinity keeps one slurmd per Kubernetes node. Left out: the controller-revision-hash label, the
    pinToNode node affinity (needs the live Node objects), DaemonSet mode's node-name affinity.
    """
    template = worker_pod_template(nodeset, controller, hash_annotations)
    meta = template["metadata"]
    spec = copy.deepcopy(template["spec"])
    labels = dict(meta.get("labels") or {})
    mode = nodeset_scaling_mode(nodeset)
    template_hostname = str(spec.get("hostname") or "")
    if mode == consts.SCALING_MODE_DAEMONSET:
        if not node_name:
            raise ValueError(f"NodeSet {name_of(nodeset)} is in DaemonSet mode: its pods need a node_name")
        name = ""
        hostname = daemonset_pod_hostname(node_name, hostname_override)
        suffix = hostname
    else:
        name = nodeset_pod_name(nodeset, ordinal)
        padded = padded_ordinal(nodeset, ordinal)
        hostname = f"{template_hostname}{padded}" if template_hostname else name
        labels[consts.LABEL_NODESET_POD_INDEX] = padded
        suffix = padded
    spec["hostname"] = hostname
    labels[consts.LABEL_NODESET_POD_NAME] = name
    labels[consts.LABEL_NODESET_POD_HOSTNAME] = hostname
    labels[consts.LABEL_NODESET_SCALING_MODE] = mode
    spec["volumes"] = _update_storage(nodeset, list(spec.get("volumes") or []), suffix)
    if not spec_of(nodeset).get("oversubscribeNode"):
        spec["affinity"] = _anti_affinity(spec.get("affinity"))
    spec.pop("nodeName", None)
    return pod_from_spec(name=name, namespace=namespace_of(nodeset), labels=labels,
                         annotations=meta.get("annotations") or {}, spec=spec, owner_kind="NodeSet",
                         owner_name=name_of(nodeset),
                         generate_name=f"{name_of(nodeset)}-" if mode == consts.SCALING_MODE_DAEMONSET else "")
