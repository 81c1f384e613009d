"""The Pod Security Standards' checks as Pod Security Admission runs them for Kubernetes 1.33: a port of
kubernetes/pod-security-admission v0.33.13 policy/check_*.go (each function names its file), with the same
check IDs, reasons and, where the Go code formats them, details.

As in policy/registry.go: `baseline` runs the baseline checks, `restricted` the baseline ones its own checks do
not override (OverrideCheckIDs) and then its own, in ID order; `privileged` runs none. Only each check's newest
version up to 1.33 is ported. The UserNamespacesPodSecurityStandards relaxation (helpers.go
relaxPolicyForUserNamespacePod) is off unless a feature gate turns it on, so it is not modelled.
Pods are plain JSON-like dicts (metadata, spec) as in a manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["privileged", "baseline", "restricted"]
LEVELS: tuple[Level, ...] = ("privileged", "baseline", "restricted")
Meta = Mapping[str, Any]
Spec = Mapping[str, Any]


@dataclass(frozen=True)
class Forbidden:
    check: str  # the check's ID, e.g. "hostPathVolumes"
    reason: str  # ForbiddenReason
    detail: str  # ForbiddenDetail

    def render(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason


def _containers(spec: Spec) -> Iterator[Mapping[str, Any]]:
    """visitor.go visitContainers: init containers, containers, ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _context(container: Mapping[str, Any]) -> Mapping[str, Any]:
    return container.get("securityContext") or {}


def _pod_context(spec: Spec) -> Mapping[str, Any]:
    return spec.get("securityContext") or {}


def _join_quote(items: list[str]) -> str:
    """helpers.go joinQuote."""
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _names(containers: list[str]) -> str:
    return f"{_plural('container', 'containers', len(containers))} {_join_quote(containers)}"


def _windows(spec: Spec) -> bool:
    return (spec.get("os") or {}).get("name") == "windows"


# --- baseline ---------------------------------------------------------------------------------------------------

def privileged(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_privileged.go privileged_1_0."""
    bad = [c["name"] for c in _containers(spec) if _context(c).get("privileged") is True]
    return Forbidden("privileged", "privileged", f"{_names(bad)} must not set securityContext.privileged=true") \
        if bad else None


def host_namespaces(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_hostNamespaces.go hostNamespaces_1_0."""
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return Forbidden("hostNamespaces", "host namespaces", ", ".join(used)) if used else None


def host_path_volumes(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_hostPathVolumes.go hostPathVolumes_1_0."""
    bad = [v["name"] for v in spec.get("volumes") or [] if v.get("hostPath") is not None]
    return Forbidden("hostPathVolumes", "hostPath volumes",
                     f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)}") if bad else None


def host_ports(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_hostPorts.go hostPorts_1_0."""
    bad, ports = [], set()
    for c in _containers(spec):
        used = [p["hostPort"] for p in c.get("ports") or [] if p.get("hostPort", 0) != 0]
        if used:
            bad.append(c["name"])
            ports.update(str(p) for p in used)
    if not bad:
        return None
    return Forbidden("hostPorts", "hostPort", f"{_names(bad)} {_plural('uses', 'use', len(bad))} "
                     f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}")


BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def capabilities_baseline(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_capabilities_baseline.go capabilitiesBaseline_1_0."""
    bad, extra = [], set()
    for c in _containers(spec):
        added = set((_context(c).get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            bad.append(c["name"])
            extra |= added
    return Forbidden("capabilities_baseline", "non-default capabilities",
                     f"{_names(bad)} must not include {_join_quote(sorted(extra))} in "
                     "securityContext.capabilities.add") if bad else None


def app_armor_profile(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_appArmorProfile.go appArmorProfile_1_0 (core/v1 DeprecatedAppArmorBeta* constants)."""
    allowed = ("RuntimeDefault", "Localhost")
    setters, values = [], set()
    pod_type = (_pod_context(spec).get("appArmorProfile") or {}).get("type")
    if _pod_context(spec).get("appArmorProfile") is not None and pod_type not in allowed:
        setters.append("pod")
        values.add(pod_type or "")
    bad = []
    for c in _containers(spec):
        profile = _context(c).get("appArmorProfile")
        if profile is not None and profile.get("type") not in allowed:
            bad.append(c["name"])
            values.add(profile.get("type") or "")
    if bad:
        setters.append(_names(bad))
    annotations = sorted(f'{k}="{v}"' for k, v in ((meta.get("annotations") or {}).items())
                         if k.startswith("container.apparmor.security.beta.kubernetes.io/")
                         and not (v == "" or v == "runtime/default" or v.startswith("localhost/")))
    listed = sorted(values) + annotations
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return Forbidden("appArmorProfile", _plural("forbidden AppArmor profile", "forbidden AppArmor profiles",
                                                len(listed)),
                     f"{' and '.join(setters)} must not set AppArmor profile type to {_join_quote(listed)}")


SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})


def se_linux_options(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_seLinuxOptions.go seLinuxOptions1_31."""
    types: set[str] = set()
    user = role = False

    def valid(options: Mapping[str, Any]) -> bool:
        nonlocal user, role
        ok = True
        if options.get("type", "") not in SELINUX_TYPES:
            ok = False
            types.add(options.get("type", ""))
        if options.get("user"):
            ok, user = False, True
        if options.get("role"):
            ok, role = False, True
        return ok

    setters = []
    pod = _pod_context(spec).get("seLinuxOptions")
    if pod is not None and not valid(pod):
        setters.append("pod")
    bad = [c["name"] for c in _containers(spec)
           if _context(c).get("seLinuxOptions") is not None and not valid(_context(c)["seLinuxOptions"])]
    if bad:
        setters.append(_names(bad))
    if not setters:
        return None
    data = ([f"{_plural('type', 'types', len(types))} {_join_quote(sorted(types))}"] if types else []) + \
        (["user may not be set"] if user else []) + (["role may not be set"] if role else [])
    return Forbidden("seLinuxOptions", "seLinuxOptions",
                     f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}")


def proc_mount(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_procMount.go procMount_1_0."""
    bad, kinds = [], set()
    for c in _containers(spec):
        mount = _context(c).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(c["name"])
            kinds.add(mount)
    return Forbidden("procMount", "procMount",
                     f"{_names(bad)} must not set securityContext.procMount to {_join_quote(sorted(kinds))}") \
        if bad else None


_SECCOMP = ("RuntimeDefault", "Localhost")  # check_seccompProfile_baseline.go validSeccomp


def _seccomp(spec: Spec, required: bool) -> Forbidden | None:
    """check_seccompProfile_baseline.go seccompProfileBaseline_1_19 and, `required`,
    check_seccompProfile_restricted.go seccompProfileRestricted_1_25."""
    if required and _windows(spec):
        return None
    setters, values = [], set()
    pod_set = False
    pod = _pod_context(spec).get("seccompProfile")
    if pod is not None:
        if pod.get("type") not in _SECCOMP:
            setters.append("pod")
            values.add(pod.get("type", ""))
        else:
            pod_set = True
    explicit, implicit = [], []
    for c in _containers(spec):
        profile = _context(c).get("seccompProfile")
        if profile is not None:
            if profile.get("type") not in _SECCOMP:
                explicit.append(c["name"])
                values.add(profile.get("type", ""))
        elif not pod_set:
            implicit.append(c["name"])
    check = "seccompProfile_restricted" if required else "seccompProfile_baseline"
    if explicit:
        setters.append(_names(explicit))
    if setters:
        return Forbidden(check, "seccompProfile", f"{' and '.join(setters)} must not set "
                         f"securityContext.seccompProfile.type to {_join_quote(sorted(values))}")
    if required and implicit:
        return Forbidden(check, "seccompProfile", f'pod or {_names(implicit)} must set '
                         'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


def seccomp_profile_baseline(meta: Meta, spec: Spec) -> Forbidden | None:
    return _seccomp(spec, required=False)


SAFE_SYSCTLS = frozenset({  # check_sysctls.go sysctlsAllowedV1Dot32
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"})


def sysctls(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_sysctls.go sysctlsV1Dot32."""
    bad = [s["name"] for s in _pod_context(spec).get("sysctls") or [] if s.get("name") not in SAFE_SYSCTLS]
    return Forbidden("sysctls", "forbidden sysctls", ", ".join(bad)) if bad else None


def windows_host_process(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_windowsHostProcess.go windowsHostProcess_1_0."""
    def host(context: Mapping[str, Any]) -> bool:
        return (context.get("windowsOptions") or {}).get("hostProcess") is True

    setters = ["pod"] if host(_pod_context(spec)) else []
    bad = [c["name"] for c in _containers(spec) if host(_context(c))]
    if bad:
        setters.append(_names(bad))
    return Forbidden("windowsHostProcess", "hostProcess", f"{' and '.join(setters)} must not set "
                     "securityContext.windowsOptions.hostProcess=true") if setters else None


# --- restricted -------------------------------------------------------------------------------------------------

def allow_privilege_escalation(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_allowPrivilegeEscalation.go allowPrivilegeEscalation_1_25."""
    if _windows(spec):
        return None
    bad = [c["name"] for c in _containers(spec) if _context(c).get("allowPrivilegeEscalation") is not False]
    return Forbidden("allowPrivilegeEscalation", "allowPrivilegeEscalation != false",
                     f"{_names(bad)} must set securityContext.allowPrivilegeEscalation=false") if bad else None


def capabilities_restricted(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_capabilities_restricted.go capabilitiesRestricted_1_25."""
    if _windows(spec):
        return None
    missing_drop, adding, forbidden = [], [], set()
    for c in _containers(spec):
        capabilities = _context(c).get("capabilities")
        if capabilities is None:
            missing_drop.append(c["name"])
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing_drop.append(c["name"])
        added = {cap for cap in capabilities.get("add") or [] if cap != "NET_BIND_SERVICE"}
        if added:
            adding.append(c["name"])
            forbidden |= added
    details = ([f'{_names(missing_drop)} must set securityContext.capabilities.drop=["ALL"]'] if missing_drop
               else []) + ([f"{_names(adding)} must not include {_join_quote(sorted(forbidden))} in "
                            "securityContext.capabilities.add"] if adding else [])
    return Forbidden("capabilities_restricted", "unrestricted capabilities", "; ".join(details)) if details else None


_RESTRICTED_VOLUME_TYPES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                            "persistentVolumeClaim", "projected", "secret")
# The order of the Go switch that names the first forbidden source of a volume.
_OTHER_VOLUME_TYPES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
                       "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
                       "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume",
                       "scaleIO", "storageos")


def restricted_volumes(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_restrictedVolumes.go restrictedVolumes_1_0."""
    bad, kinds = [], set()
    for v in spec.get("volumes") or []:
        if any(v.get(t) is not None for t in _RESTRICTED_VOLUME_TYPES):
            continue
        bad.append(v["name"])
        kinds.add(next((t for t in _OTHER_VOLUME_TYPES if v.get(t) is not None), "unknown"))
    if not bad:
        return None
    return Forbidden("restrictedVolumes", "restricted volume types",
                     f"{_plural('volume', 'volumes', len(bad))} {_join_quote(bad)} {_plural('uses', 'use', len(bad))} "
                     f"{_plural('restricted volume type', 'restricted volume types', len(kinds))} "
                     f"{_join_quote(sorted(kinds))}")


def run_as_non_root(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_runAsNonRoot.go runAsNonRoot_1_0."""
    setters = []
    pod_value = _pod_context(spec).get("runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit, implicit = [], []
    for c in _containers(spec):
        value = _context(c).get("runAsNonRoot")
        if value is not None:
            if value is False:
                explicit.append(c["name"])
        elif pod_value is not True:
            implicit.append(c["name"])
    if explicit:
        setters.append(_names(explicit))
    if setters:
        return Forbidden("runAsNonRoot", "runAsNonRoot != true",
                         f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")
    return Forbidden("runAsNonRoot", "runAsNonRoot != true",
                     f"pod or {_names(implicit)} must set securityContext.runAsNonRoot=true") if implicit else None


def run_as_user(meta: Meta, spec: Spec) -> Forbidden | None:
    """check_runAsUser.go runAsUser_1_23."""
    setters = ["pod"] if _pod_context(spec).get("runAsUser") == 0 else []
    bad = [c["name"] for c in _containers(spec) if _context(c).get("runAsUser") == 0]
    if bad:
        setters.append(_names(bad))
    return Forbidden("runAsUser", "runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") \
        if setters else None


def seccomp_profile_restricted(meta: Meta, spec: Spec) -> Forbidden | None:
    return _seccomp(spec, required=True)


Check = Callable[[Meta, Spec], Forbidden | None]
BASELINE: dict[str, Check] = {
    "appArmorProfile": app_armor_profile, "capabilities_baseline": capabilities_baseline,
    "hostNamespaces": host_namespaces, "hostPathVolumes": host_path_volumes, "hostPorts": host_ports,
    "privileged": privileged, "procMount": proc_mount, "seLinuxOptions": se_linux_options,
    "seccompProfile_baseline": seccomp_profile_baseline, "sysctls": sysctls,
    "windowsHostProcess": windows_host_process,
}
RESTRICTED: dict[str, Check] = {
    "allowPrivilegeEscalation": allow_privilege_escalation, "capabilities_restricted": capabilities_restricted,
    "restrictedVolumes": restricted_volumes, "runAsNonRoot": run_as_non_root, "runAsUser": run_as_user,
    "seccompProfile_restricted": seccomp_profile_restricted,
}
OVERRIDES = {"capabilities_restricted": "capabilities_baseline", "restrictedVolumes": "hostPathVolumes",
             "seccompProfile_restricted": "seccompProfile_baseline"}


def checks(level: Level) -> list[Check]:
    """registry.go populate: baseline IDs sorted, then restricted IDs sorted; overridden baseline checks dropped."""
    if level == "privileged":
        return []
    if level == "baseline":
        return [BASELINE[i] for i in sorted(BASELINE)]
    overridden = set(OVERRIDES.values())
    return [BASELINE[i] for i in sorted(BASELINE) if i not in overridden] + [RESTRICTED[i] for i in sorted(RESTRICTED)]


def evaluate(level: Level, metadata: Meta, spec: Spec) -> list[Forbidden]:
    """What Pod Security Admission at `level` (Kubernetes 1.33) forbids in a pod; empty: admitted."""
    return [found for check in checks(level) if (found := check(metadata, spec)) is not None]
