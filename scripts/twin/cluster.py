"""The twin of a stack's cluster, from its offline plan: the pods Slinky's operator would run for the plan's
Controller, Accounting, RestApi, LoginSet and NodeSets (scripts/twin/operator), the accounting database, and the
plan's own Jobs, each in a network namespace of its own with the plan's NetworkPolicies enforced
(scripts/twin/policy.py), all on this machine, running Slurm 25.11 (tools/build_slurm.sh) through Slinky's own
entrypoints and supervisor configs (scripts/twin/images.py).

`Twin(plan_dir, state_dir).up()` starts it; `down()` stops every pod and removes the network. Where the twin must
differ from the cluster, the difference is in TWIN_SLURM_CONF (with why), in images.py (hardware, config
directory) or database.py (what stands in for AWS), and docs/architecture.md "The twin" lists what only a real
cluster shows.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components import catalog
from components.config.checkpoint_store import JOB_ENV_CONFIG_MAP, STORE_KEY, job_env_value
from components.kubernetes.label_selectors import selects
from components.slinky.identity import SYNC_CONTAINER
from components.slinky.slurm_conf import JOB_PRIVATE_DIRS
from scripts.checks import pod_flows
from scripts.offline.plan_model import Plan
from scripts.twin import (
    autoscaling,
    aws,
    database,
    hardware,
    images,
    karpenter,
    kubelet,
    network,
    policy,
    scaling,
    standin_table,
)
from scripts.twin.errors import TwinError
from scripts.twin.network import PodLink
from scripts.twin.operator import accounting as accounting_builder
from scripts.twin.operator import controller as controller_builder
from scripts.twin.operator import login as login_builder
from scripts.twin.operator import names, slurmconf, slurmdbd, worker
from scripts.twin.operator import restapi as restapi_builder
from scripts.twin.operator.model import ContainerPlan, PodPlan, pod_from_spec
from scripts.twin.pods import Container, Device, Mount, PodRuntimeSpec, RunningPod, Tree, start
from scripts.twin.volumes import Secrets, Volumes

REPO = Path(__file__).resolve().parents[2]
STANDINS_DIR = standin_table.STANDINS_DIR
# What the twin's slurm.conf changes, and why. Everything else is the operator's slurm.conf for the plan.
TWIN_SLURM_CONF: dict[str, tuple[str, str]] = {
    "ProctrackType": ("proctrack/linuxproc", "every pod shares this machine's cgroup v1 hierarchy, so jobs are "
                      "tracked by process tree, not by cgroup (cgroup/v2 needs a delegated v2 hierarchy per pod)"),
    "TaskPlugin": ("task/none", "no cgroup fencing and no CPU binding: the node's CPUs are the instance type's, "
                   "not this machine's"),
    "JobAcctGatherType": ("jobacct_gather/linux", "accounting from /proc instead of cgroups (as above)"),
    "SlurmdParameters": ("config_overrides", "a node registers the instance type's CPUs and memory, which this "
                         "machine does not have (slurm.conf(5) SlurmdParameters=config_overrides)"),
}
# cgroup.conf: no cgroup plugin is used (above); Slurm 25.11 still loads cgroup/v2 when cgroup.conf names it.
# The plan's own sidecars, which the twin runs (the operator's are listed in differences.py).
TWIN_SIDECARS = frozenset({SYNC_CONTAINER})
TWIN_CGROUP_CONF = {"CgroupPlugin": ("disabled", "no cgroup plugin is used in the twin (see TWIN_SLURM_CONF)")}
# The in-cluster MariaDB's pod labels: mariadb-operator 26.6.0 pkg/builder/labels/labels.go
# WithMariaDBSelectorLabels (app.kubernetes.io/name, app.kubernetes.io/instance).
MARIADB_APP = "mariadb"
# Where the twin puts the RDS stand-in: a host outside the pods, in the VPC range.
RDS_INDEX = 250
JWT_KEY_BYTES = 32  # HS256 key (Slurm's auth/jwt reads any length; 32 bytes = 256 bits)
SLURM_KEY_BYTES = 1024  # the Slinky chart's generated slurm.key length
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
IRSA_ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
IRSA_TOKEN_DIR = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def training_torchrun() -> Path:
    """The torchrun the twin's jobs run: the venv of the torch the default training images ship (torch 2.9.0 in
    .venv-xla, `make xla-venv`: jobs/requirements-xla.txt), so a job on the twin runs what it runs on the cluster;
    this repository's own venv (another torch) only where that venv was not built."""
    image = REPO / ".venv-xla" / "bin" / "torchrun"
    return image if image.exists() else REPO / ".venv" / "bin" / "torchrun"


def check_repository_location(repo: Path) -> None:
    """The twin's jobs run this checkout's venvs (training_torchrun), but a job sees a /tmp and /dev/shm of its
    own (namespace/tmpfs, as on the cluster), so a checkout under one of them is invisible to every job."""
    for private in JOB_PRIVATE_DIRS:
        if repo.is_relative_to(private):
            raise TwinError(f"the repository is at {repo}, under {private}, which every Slurm job sees as its own "
                            f"empty directory (job_container.conf Dirs): its jobs could not run this checkout's "
                            f"torchrun. Clone it outside {', '.join(JOB_PRIVATE_DIRS)}")


# torch_neuronx's CPU stand-in (tests/standins/torch_neuronx): the `neuron` process-group and compile backends.
TORCH_NEURONX_STANDIN = REPO / "tests" / "standins"


def torchneuron_training() -> tuple[Path, dict[str, str]]:
    """The torchrun and environment of a TorchNeuron image on the twin (what a Trainium2 partition's native job
    runs: SLURM_EKS_DEVICE=neuron): TorchNeuron's torch line (torch-neuronx 2.13/2.14, docs/trainium.md) is this
    repository's venv's torch 2.13, and its torch_neuronx the CPU stand-in, which serves the `neuron` backends on
    CPU tensors. The job's own PYTHONPATH comes after it."""
    return REPO / ".venv" / "bin" / "torchrun", {"PYTHONPATH": str(TORCH_NEURONX_STANDIN)}


@dataclass
class TwinPod:
    """A pod (running once started) and what the policies see of it."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    kind: str  # controller, accounting, restapi, login, nodeset, database, job, prometheus
    running: RunningPod | None = None

    @property
    def started(self) -> RunningPod:
        if self.running is None:
            raise TwinError(f"pod {self.name} has not started")
        return self.running


def require_image(pod: PodPlan, container: ContainerPlan) -> None:
    """The API server's validation of a pod: spec.(init)Containers[].image is a "Required value"."""
    if not container.image:
        raise TwinError(f"pod {pod.name}: container {container.name} has no image, so Kubernetes would refuse the "
                        "pod (set the image in the object that makes this container)")


def _by_kind(plan: Plan) -> dict[str, dict[str, dict[str, Any]]]:
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for obj in plan.manifests():
        found.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    return found


def _set_keys(text: str, changes: Mapping[str, tuple[str, str]]) -> str:
    """`text` (Key=value lines) with each key of `changes` set once: replaced where it is, else appended."""
    wanted = {key.lower(): key for key in changes}
    out, done = [], set()
    for line in text.splitlines():
        key = line.split("=", 1)[0].strip().lower() if "=" in line and len(line.split()) == 1 else ""
        if key in wanted:
            if key not in done:
                original = wanted[key]
                value, why = changes[original]
                out.append(f"# twin: {why}")
                out.append(f"{original}={value}")
                done.add(key)
            continue
        out.append(line)
    for key, original in wanted.items():
        if key not in done:
            value, why = changes[original]
            out += [f"# twin: {why}", f"{original}={value}"]
    return "\n".join(out) + "\n"


class Twin:
    """One stack's twin; see the module docstring."""

    def __init__(self, plan: Plan | Path, state_dir: Path, *, nodes_per_nodeset: int | None = None,
                 launch_delay_s: float = scaling.TWIN_LAUNCH_DELAY_S,
                 shared: Path | None = None, slurm_prefix: Path | None = None) -> None:
        self.plan = plan if isinstance(plan, Plan) else Plan.load(plan)
        self.objects = _by_kind(self.plan)
        self.state = state_dir.resolve()
        # None: each NodeSet starts at the plan's replicas and the controllers scale it (scripts/twin/scaling.py);
        # N: N pods a NodeSet from the start and no controllers (`slurm-eks local up --nodes N`).
        self.nodes_per_nodeset = nodes_per_nodeset
        self.launch_delay_s = launch_delay_s
        self.controllers: scaling.Controllers | None = None
        self.clock = scaling.Clock()
        self.kubelet = kubelet.Kubelet(self._restart_by_kubelet, self.clock)
        self._platform_stop = threading.Event()
        self._platform: threading.Thread | None = None
        self.platform_errors: list[str] = []
        self.lock = threading.RLock()
        # NodeSet pods scaled in (scaling.py), kept with their addresses for what they did while they ran.
        self.departed: dict[str, TwinPod] = {}
        # The Kubernetes nodes Karpenter made for NodeSet pods (karpenter.py), by name.
        self.nodes: dict[str, dict[str, Any]] = {}
        self.shared = (shared or REPO.parent / "shared").resolve()
        self.prefix = (slurm_prefix or REPO / "build" / "slurm").resolve()
        if not (self.prefix / "sbin" / "slurmctld").exists():
            raise TwinError(f"no Slurm build in {self.prefix}: `make slurm` builds Slurm 25.11 there")
        check_repository_location(REPO.resolve())
        (self.controller,) = self.objects["Controller"].values()
        self.accounting = slurmconf.accounting_for_controller(self.controller,
                                                             list(self.objects.get("Accounting", {}).values()))
        self.nodesets = slurmconf.nodesets_for_controller(self.controller,
                                                          list(self.objects.get("NodeSet", {}).values()))
        twin_id = hashlib.sha256(str(self.state).encode()).hexdigest()[:4]
        vpc = self._vpc_cidr()
        self.network = network.PodNetwork(twin_id, network.pod_subnet(vpc))
        self.pods: dict[str, TwinPod] = {}
        self.secrets = Secrets(self.state / "secrets", self.objects.get("Secret", {}), {
            "slurm.key": lambda: os.urandom(SLURM_KEY_BYTES), "jwt.key": lambda: os.urandom(JWT_KEY_BYTES)})
        self.hosts: dict[str, str] = {}
        self._irsa_env: dict[str, dict[str, str]] = {}
        # Jobs of the plan whose work the twin does itself (database.py says why).
        self.stood_in_jobs: set[str] = set()
        # Each pod's stand-ins by name (standin_table.py), as given when it started.
        self.given: dict[str, list[str]] = {}

    # --- what the plan says ------------------------------------------------------------------------------

    def _vpc_cidr(self) -> str:
        vpcs = self.plan.of_type("aws:ec2/vpc:Vpc")
        if not vpcs:
            raise TwinError("the plan has no VPC (aws:ec2/vpc:Vpc): the twin takes its addresses from its range")
        return str(vpcs[0].inputs["cidrBlock"])

    def config_maps(self) -> dict[str, dict[str, Any]]:
        """The plan's ConfigMaps plus the ones the operator writes: `<controller>-config` (slurm.conf,
        cgroup.conf), with the twin's changes."""
        maps = dict(self.objects.get("ConfigMap", {}))
        data = slurmconf.controller_config_data(self.controller, self.nodesets, self.accounting, maps)
        data["slurm.conf"] = _set_keys(data["slurm.conf"], TWIN_SLURM_CONF)
        maps[names.controller_config_name(self.controller)] = {"data": data}
        for loginset in self.objects.get("LoginSet", {}).values():
            maps[names.loginset_ssh_config_name(loginset)] = {"data": login_builder.login_ssh_config_data(loginset)}
        job_aws = maps.get(JOB_ENV_CONFIG_MAP)
        if job_aws is not None and getattr(self, "aws", None) is not None:  # jobs reach the twin's AWS
            data = job_aws["data"]
            maps[JOB_ENV_CONFIG_MAP] = {**job_aws, "data": {**data, aws.JOB_ENV_KEY: aws.with_endpoint(
                data[aws.JOB_ENV_KEY], str(self.aws.address))}}
        for name, cm in list(maps.items()):
            if "cgroup.conf" in (cm.get("data") or {}):
                maps[name] = {**cm, "data": {**cm["data"], "cgroup.conf": _set_keys(cm["data"]["cgroup.conf"],
                                                                                     TWIN_CGROUP_CONF)}}
        return maps

    def _secret_objects(self) -> dict[str, dict[str, Any]]:
        """The plan's Secrets plus the Accounting's generated slurmdbd.conf Secret."""
        found = dict(self.objects.get("Secret", {}))
        if self.accounting is not None:
            ref = names.accounting_storage_password_ref(self.accounting)
            password = self.secrets.value(ref["name"], ref["key"]).decode()
            text = slurmdbd.build_slurmdbd_conf(self.accounting, password)
            found[names.accounting_config_name(self.accounting)] = {"stringData": {"slurmdbd.conf": text}}
        for loginset in self.objects.get("LoginSet", {}).values():
            found[names.loginset_ssh_host_keys_name(loginset)] = {"stringData": self._host_keys()}
        return found

    def _host_keys(self) -> dict[str, str]:
        """The SSH host keys the operator generates for a LoginSet (one set per twin, ssh-keygen)."""
        directory = self.state / "ssh-host-keys"
        if not directory.exists():
            directory.mkdir(parents=True)
            for kind in ("rsa", "ed25519", "ecdsa"):
                subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f",
                                str(directory / f"ssh_host_{kind}_key")], check=True, capture_output=True)
        return {path.name: path.read_text() for path in sorted(directory.iterdir())}

    # --- pods ----------------------------------------------------------------------------------------------

    def _service_account(self) -> Path:
        directory = self.state / "serviceaccount"
        if not directory.exists():
            ca, _cert, _key = database.certificate_authority(self.state / "api-tls", "kubernetes.default.svc")
            directory.mkdir()
            (directory / "token").write_text("twin: there is no Kubernetes API here\n")
            shutil.copy(ca, directory / "ca.crt")
            (directory / "namespace").write_text(self._namespace())
            for path in (directory, *directory.iterdir()):
                path.chmod(0o755 if path.is_dir() else 0o644)
        return directory

    def _env(self, pod: PodPlan, container: ContainerPlan) -> dict[str, str]:
        env = {"PATH": CONTAINER_PATH, "HOSTNAME": pod.hostname or pod.name,
               # The kubelet's service environment for the API (kubernetes.io/docs/concepts/services-networking/
               # service/#environment-variables): here an address in the VPC where nothing listens.
               "KUBERNETES_SERVICE_HOST": str(self.network.host_address), "KUBERNETES_SERVICE_PORT": "443",
               **self._irsa_env.get(pod.name, {})}
        for var in container.env:
            if var.value_from is None:
                env[var.name] = var.value
                continue
            if "fieldRef" in var.value_from:
                path = var.value_from["fieldRef"]["fieldPath"]
                if path.startswith("metadata.annotations['"):
                    env[var.name] = pod.annotations.get(path.split("'")[1], "")
                elif path == "metadata.name":
                    env[var.name] = pod.name
                elif path == "metadata.namespace":
                    env[var.name] = pod.namespace
                else:
                    raise TwinError(f"pod {pod.name}: env {var.name} reads {path}, which the twin does not give")
            elif "secretKeyRef" in var.value_from:
                ref = var.value_from["secretKeyRef"]
                env[var.name] = self.secrets.value(ref["name"], ref["key"]).decode()
            else:
                raise TwinError(f"pod {pod.name}: env {var.name} comes from {sorted(var.value_from)}")
        return env

    def _run_as(self, pod: PodPlan, container: ContainerPlan) -> tuple[int, int] | None:
        context = {**pod.security_context, **container.security_context}
        if context.get("runAsUser") is None:
            return None
        return int(context["runAsUser"]), int(context.get("runAsGroup", context["runAsUser"]))

    def _container(self, pod: PodPlan, container: ContainerPlan, volumes: Volumes, builder: images.ImageBuilder,
                   extra_mounts: Iterable[Any] = ()) -> Container:
        require_image(pod, container)
        stage = images.stage_for_image(container.image, pod.labels)
        known = builder.knows(stage)
        if known:
            command = builder.command(stage, list(container.args) if container.args else None,
                                      list(container.command) if container.command else None)
        else:
            command = [*container.command, *container.args]
            if not command:
                raise TwinError(f"pod {pod.name}: container {container.name} ({container.image}) runs its image's "
                                "entrypoint, which the twin does not know")
        return Container(container.name, command, self._env(pod, container),
                         [*volumes.mounts(container.volume_mounts), *extra_mounts],
                         workdir=container.working_dir or None, run_as=self._run_as(pod, container))

    def _image_layers(self, pod: PodPlan, builder: images.ImageBuilder) -> list[str]:
        stage = images.stage_for_image(pod.containers[0].image, pod.labels)
        return [*map(str, builder.layers(stage)), "/"] if builder.knows(stage) else ["/"]

    def _start_pod(self, pod: PodPlan, kind: str, builder: images.ImageBuilder, *,
                   node: hardware.NodeHardware | None = None, extra_mounts: Mapping[str, list[Any]] | None = None,
                   skip_init: Iterable[str] = (), restart_policy: str = "Always") -> TwinPod:
        directory = self.state / "pods" / pod.name
        volumes = Volumes(directory / "volumes", self.config_maps(), self.secrets, self._claim)
        volumes.secrets.objects = self._secret_objects()
        volumes.realise(pod)
        extra = dict(extra_mounts or {})
        standin_mounts, devices, trees = self._standins(pod, node)
        first = pod.containers[0].name
        extra[first] = [*extra.get(first, ()), *standin_mounts]
        # Restartable init containers are sidecars. The operator's (`logfile`, which turns the daemon's log file
        # into a FIFO it prints; `reconfigure`) are not run: the twin reads the log file itself and reconfigures.
        account_name = pod.spec.get("serviceAccountName") or pod.spec.get("serviceAccount")
        role = ((self.objects.get("ServiceAccount", {}).get(account_name) or {}).get("metadata", {})
                .get("annotations", {}).get(IRSA_ROLE_ANNOTATION)) if account_name else None
        if role:
            # What EKS's pod identity webhook adds to the pod of an IRSA service account (aws/amazon-eks-pod-
            # identity-webhook README: AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and the projected token). There is
            # no STS or EC2 to call here: the calls fail and the controller's other steps go on.
            token = self.state / "irsa"
            token.mkdir(exist_ok=True)
            (token / "token").write_text("twin: there is no STS here\n")
            token.chmod(0o755)
            (token / "token").chmod(0o644)
            irsa = [Mount(str(token), IRSA_TOKEN_DIR, readonly=True)]
            extra = {c.name: [*extra.get(c.name, ()), *irsa] for c in (*pod.init_containers, *pod.containers)}
            region = str(self.plan.outputs.get("region", ""))
            self._irsa_env[pod.name] = {"AWS_ROLE_ARN": str(role), "AWS_WEB_IDENTITY_TOKEN_FILE":
                                        f"{IRSA_TOKEN_DIR}/token", "AWS_STS_REGIONAL_ENDPOINTS": "regional",
                                        "AWS_REGION": region, "AWS_DEFAULT_REGION": region}
        if pod.spec.get("automountServiceAccountToken") is not False:
            # What the kubelet gives every such pod: the API's address and a service-account token. The twin has
            # no Kubernetes API (nothing answers there): a controller's API calls fail, as they would during an
            # API outage, and its other work goes on (docs/architecture.md "The twin").
            account = [Mount(str(self._service_account()), SERVICE_ACCOUNT_DIR, readonly=True)]
            extra = {c.name: [*extra.get(c.name, ()), *account] for c in (*pod.init_containers, *pod.containers)}
        inits = [self._container(pod, c, volumes, builder, extra.get(c.name, ()))
                 for c in pod.init_containers if c.restart_policy != "Always" and c.name not in skip_init]
        mains = [self._container(pod, c, volumes, builder, extra.get(c.name, ())) for c in pod.containers]
        # The plan's own sidecar (identity-sync) runs beside the daemon, as the kubelet runs a restartable init
        # container once the init containers before it are done.
        mains += [self._container(pod, c, volumes, builder, extra.get(c.name, ()))
                  for c in pod.init_containers if c.restart_policy == "Always" and c.name in TWIN_SIDECARS]
        spec = PodRuntimeSpec(pod.name, pod.hostname or pod.name, self._image_layers(pod, builder), mains, inits,
                              list(devices), list(trees), restart_policy)
        link = self.network.links[pod.name]
        ports = {p.name: p.container_port for c in pod.containers for p in c.ports if p.name}
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "plan-ports.json").write_text(json.dumps(ports))
        running = start(spec, link, directory, self.state / "hosts")
        twin_pod = TwinPod(pod.name, pod.namespace, pod.labels, kind, running)
        self.pods[pod.name] = twin_pod
        return twin_pod

    def update_config_map(self, name: str, data: Mapping[str, str]) -> list[str]:
        """A ConfigMap changed by `pulumi up`, and the kubelet's update of every running pod's volume of it: the
        files rewritten in place, each by a rename (pkg/volume/util/atomic_writer.go swaps the whole volume by one
        symlink, `..data`; a subPath mount is never updated). Returns the pods updated."""
        with self.lock:
            self.objects["ConfigMap"][name] = {**self.objects["ConfigMap"][name], "data": dict(data)}
            updated, maps = [], self.config_maps()
            for pod_name, (_kind, pod) in self.plans.items():
                if pod_name not in self.pods or self.pods[pod_name].running is None:
                    continue
                volumes = Volumes(self.state / "pods" / pod_name / "volumes", maps, self.secrets, self._claim)
                if volumes.refresh(pod, name):
                    updated.append(pod_name)
            return updated

    def _claim(self, name: str) -> Path:
        """A PersistentVolumeClaim's directory: one per claim, shared by every pod mounting it."""
        path = self.state / "claims" / name
        if not path.exists():
            path.mkdir(parents=True)
            path.chmod(0o1777 if name != "statesave" else 0o755)
        return path

    # --- the network ---------------------------------------------------------------------------------------

    def _write_hosts(self) -> None:
        lines = ["127.0.0.1 localhost"]
        lines += [f"{address} {' '.join(dict.fromkeys(hostnames))}" for address, hostnames in self._names().items()]
        path = self.state / "hosts"
        text = "\n".join(lines) + "\n"
        if path.exists():
            with open(path, "r+") as file:  # in place: every pod has this file bind-mounted
                file.write(text)
                file.truncate()
        else:
            path.write_text(text)

    def _names(self) -> dict[str, list[str]]:
        by_address: dict[str, list[str]] = {}
        for name, address in self.hosts.items():
            by_address.setdefault(address, []).append(name)
        return by_address

    def _add_host(self, address: str, *hostnames: str) -> None:
        for hostname in hostnames:
            self.hosts[hostname] = address

    def _policy_pods(self) -> list[policy.PolicyPod]:
        return [policy.PolicyPod(p.name, p.namespace, p.labels, self.network.links[p.name].address)
                for p in self.pods.values()]

    def apply_policies(self) -> None:
        """Each pod's ruleset from the plan's NetworkPolicies and the pods there are now."""
        with self.lock:
            self._apply_policies()

    def _apply_policies(self) -> None:
        policies = list(self.objects.get("NetworkPolicy", {}).values())
        namespaces = {name: {"kubernetes.io/metadata.name": name, **(obj["metadata"].get("labels") or {})}
                      for name, obj in self.objects.get("Namespace", {}).items()}
        pods = self._policy_pods()
        for pod in pods:
            namespaces.setdefault(pod.namespace, {"kubernetes.io/metadata.name": pod.namespace})
        for pod in pods:
            policy.apply(self.network.links[pod.name].netns, policy.ruleset(pod, policies, pods, namespaces))

    def recorded(self) -> list[policy.Recorded]:
        """Every connection recorded, also by pods scaled in since (their network namespace stays)."""
        return [r for p in self.all_pods().values() for r in policy.recorded(p.name, self.network.links[p.name].netns)]

    def all_pods(self) -> dict[str, TwinPod]:
        """The pods there are, and those scaled in since (which others may have reached while they ran)."""
        return {**self.departed, **self.pods}

    # --- bring-up ------------------------------------------------------------------------------------------

    def _images(self) -> images.ImageBuilder:
        """The image layers: Slinky's stages as they are, plus the hardware shim (a departure: hardware.py)."""
        shim = self.state / "standins" / "slurmd"
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text(hardware.slurmd_shim(self.prefix / "sbin" / "slurmd"))
        shim.chmod(0o755)
        return images.ImageBuilder(self.shared, self.prefix, self.state / "images",
                                   {"slurmd": [("/usr/sbin/slurmd", shim)],
                                    "slurmd-pyxis": [("/usr/sbin/slurmd", shim)]})

    def _standin_files(self) -> dict[str, Path]:
        """The files the stand-ins of standin_table.py mount, made once per twin."""
        directory = self.state / "standins"
        directory.mkdir(parents=True, exist_ok=True)
        pyxis_so = directory / "spank_pyxis.so"
        if not pyxis_so.exists():
            result = subprocess.run(["gcc", "-shared", "-fPIC", "-Wall", "-Werror", f"-I{self.prefix / 'include'}",
                                     "-o", str(pyxis_so), str(STANDINS_DIR / "pyxis_standin.c")],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise TwinError(f"building the pyxis stand-in failed: {result.stderr.strip()}")
        native, native_env = torchneuron_training()
        scripts = {
            "pyxis.conf": "required /usr/lib/slurm-eks-twin/spank_pyxis.so\n",
            # The training image's launcher: the images' torch; a TorchNeuron job's (the native Trainium script
            # exports SLURM_EKS_DEVICE=neuron) is the TorchNeuron image's (torchneuron_training).
            "torchrun": ("#!/bin/sh\n# The twin's training environment (scripts/twin/standin_table.py).\n"
                         'if [ "${SLURM_EKS_DEVICE:-}" = neuron ]; then\n'
                         f'  PYTHONPATH="{native_env["PYTHONPATH"]}${{PYTHONPATH:+:$PYTHONPATH}}" exec {native} "$@"\n'
                         "fi\n"
                         f"exec {training_torchrun()} \"$@\"\n"),
            "slurm-eks": f"#!/bin/sh\nexec {REPO / '.venv' / 'bin' / 'slurm-eks'} \"$@\"\n",
            # The training image's Python (the checkpoint manager and evaluation steps run it): this repository's
            # venv, with boto3, mlflow and lm-eval as `pip install slurm-eks[checkpoints,evaluation,registry]` gives.
            "python3": f"#!/bin/sh\nexec {REPO / '.venv' / 'bin' / 'python'} \"$@\"\n",
        }
        for name, text in scripts.items():
            (directory / name).write_text(text)
            (directory / name).chmod(0o755)
        return {"/usr/share/pyxis/pyxis.conf": directory / "pyxis.conf",
                "/usr/lib/slurm-eks-twin/spank_pyxis.so": pyxis_so, "/usr/bin/enroot": STANDINS_DIR / "enroot",
                "/usr/bin/nvidia-smi": STANDINS_DIR / "devices", "/usr/local/bin/torchrun": directory / "torchrun",
                "/usr/local/bin/python3": directory / "python3", "/usr/local/bin/slurm-eks": directory / "slurm-eks",
                "/usr/local/bin/neuron_parallel_compile": STANDINS_DIR / "neuron_parallel_compile"}

    def _standins(self, pod: PodPlan, node: hardware.NodeHardware | None = None
                  ) -> tuple[list[Mount], list[Device], list[Tree]]:
        """What standin_table.py gives `pod` (only what its planned spec has the mechanism for), made real: files
        mounted into its first container, device nodes and /proc or /sys trees. `node`: a NodeSet pod's hardware."""
        given = standin_table.given(pod)
        self.given[pod.name] = [entry.name for entry in given]
        files = self._standin_files()
        mounts = [Mount(str(files[path]), path, readonly=True) for entry in given for path in entry.gives
                  if path in files]
        limits = (pod.containers[0].resources or {}).get("limits") or {}
        kinds = {"GPU devices": "/dev/nvidia", "EFA devices": "/dev/infiniband/", "Neuron devices": "/dev/neuron"}
        allowed = tuple(kinds[e.name] for e in given if e.name in kinds)
        devices = [Device(*d) for d in hardware.device_nodes(limits) if allowed and d[0].startswith(allowed)]
        trees: list[Tree] = []
        directory = self.state / "pods" / pod.name
        names_ = {entry.name for entry in given}
        if node is not None and node.gpus and "NVIDIA driver files" in names_:
            proc, sys_drivers = hardware.nvidia_driver_files(directory / "driver", node)
            trees += [Tree(str(proc), "/proc/driver"), Tree(str(sys_drivers), "/sys/bus/pci/drivers")]
            mounts.append(Mount(str(proc), images.PROC_DRIVER_STANDIN, readonly=True))
        efa = int(str(limits.get(hardware.EFA_RESOURCE, 0)))
        if efa and "EFA sysfs" in names_:
            trees.append(Tree(str(hardware.efa_sysfs(directory / "sys-class", efa)), "/sys/class", merge=True))
        return mounts, devices, trees

    def _database(self) -> None:
        assert self.accounting is not None
        storage = self.accounting["spec"]["storageConfig"]
        ref = names.accounting_storage_password_ref(self.accounting)
        mariadb_objects = self.objects.get("MariaDB", {})
        tls = not mariadb_objects
        spec = database.DatabaseSpec(storage["host"], storage.get("database", "slurm_acct_db"),
                                     storage.get("username", "slurm"),
                                     self.secrets.value(ref["name"], ref["key"]).decode(), tls)
        name = next(iter(mariadb_objects), "rds")
        if not mariadb_objects:
            self.stood_in_jobs |= {n for n, job in self.objects.get("Job", {}).items()
                                   if any("mariadb" in c.get("image", "")
                                          for c in job["spec"]["template"]["spec"]["containers"])}
        link = self.network.attach(name, None if mariadb_objects else RDS_INDEX)
        self._add_host(str(link.address), spec.host, *( [f"{name}.{self._namespace()}",
                       f"{name}.{self._namespace()}.svc.cluster.local"] if mariadb_objects else []))
        certs = database.certificate_authority(self.state / "db-tls", spec.host) if tls else None
        self.db_ca = certs[0] if certs else None
        database.prepare_datadir(self.state / "db" / "data")
        container = database.server_container(self.state / "db" / "data", self.state / "db" / "run", certs)
        spec_ = PodRuntimeSpec(name, name, ["/"], [container])
        running = start(spec_, link, self.state / "pods" / name, self.state / "hosts")
        labels = {"app.kubernetes.io/name": MARIADB_APP, "app.kubernetes.io/instance": name} if mariadb_objects else {}
        pod = TwinPod(name, self._namespace(), labels, "database", running)
        if mariadb_objects:
            self.pods[name] = pod
        self.db = pod
        self.db_spec = spec

    def _namespace(self) -> str:
        return names.namespace_of(self.controller)

    def start_outside(self, name: str, index: int, container: Container) -> PodLink:
        """A service outside the VPC (scripts/twin/aws.py): its own namespace at network.OUTSIDE's host `index`,
        the machine's root as its file system; stopped with the pods."""
        link = self.network.attach_outside(name, index)
        start(PodRuntimeSpec(name, name, ["/"], [container]), link, self.state / "pods" / name, self.state / "hosts")
        return link

    def _start_aws(self, job_env: str) -> None:
        self.aws = self.start_outside("aws", aws.AWS_INDEX, aws.aws_container())
        store = job_env_value(job_env, STORE_KEY)
        if store:
            bucket = store.removeprefix("s3://").split("/")[0]
            region = str(self.plan.outputs.get("region", "")) or "us-east-1"
            made = subprocess.run(["ip", "netns", "exec", self.aws.netns, *aws.create_bucket_command(bucket, region)],
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
            if made.returncode != 0:
                raise TwinError(f"the twin's AWS (moto) did not make bucket {bucket}: {made.stderr.strip()[-500:]}")

    def _wait(self, what: str, check: Any, timeout_s: float, where: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.5)
        raise TwinError(f"{what} not within {timeout_s:.0f} s (see {where})")

    def _port_open(self, pod: str, port: int) -> bool:
        link = self.network.links[pod]
        return subprocess.run(["ip", "netns", "exec", link.netns, "timeout", "1", "bash", "-c",
                               f"exec 3<>/dev/tcp/{link.address}/{port}"], capture_output=True).returncode == 0

    def up(self) -> None:
        if self.state.exists():
            self.down()
            shutil.rmtree(self.state)
        self.state.mkdir(parents=True)
        os.chmod(self.state, 0o755)
        builder = self._images()
        self.network.create_bridge()
        try:
            self._up(builder)
        except BaseException:
            self.down()
            raise

    def _pod_plans(self) -> dict[str, tuple[str, PodPlan]]:
        controller = controller_builder.controller_pod(self.controller)
        plans = {controller.name: ("controller", controller)}
        if self.accounting is not None:
            pod = accounting_builder.accounting_pod(self.accounting)
            plans[pod.name] = ("accounting", pod)
        for restapi in self.objects.get("RestApi", {}).values():
            for pod in restapi_builder.restapi_pods(restapi, self.controller)[:1]:
                plans[pod.name] = ("restapi", pod)
        for nodeset in self.nodesets:
            for ordinal in range(self.nodes_per_nodeset or 0):
                pod = worker.nodeset_pod(nodeset, self.controller, ordinal)
                plans[pod.name] = ("nodeset", pod)
        for loginset in self.objects.get("LoginSet", {}).values():
            for pod in login_builder.login_pods(loginset, self.controller)[:1]:
                plans[pod.name] = ("login", pod)
        return plans

    def _up(self, builder: images.ImageBuilder) -> None:
        plans = self._pod_plans()
        self.plans = plans
        for name, (_kind, pod) in plans.items():
            link = self.network.attach(name)
            self._add_host(str(link.address), name)
            if pod.subdomain:
                self._add_host(str(link.address), f"{name}.{pod.subdomain}.{pod.namespace}")
        controller = next(p for k, p in plans.values() if k == "controller")
        ctl_address = str(self.network.links[controller.name].address)
        self._add_host(ctl_address, names.controller_service_fqdn_short(self.controller),
                       names.controller_service_fqdn(self.controller))
        if self.accounting is not None:
            accounting_pod = next(p for k, p in plans.values() if k == "accounting")
            address = str(self.network.links[accounting_pod.name].address)
            self._add_host(address, names.accounting_service_fqdn_short(self.accounting),
                           f"{names.accounting_service_fqdn_short(self.accounting)}.svc.cluster.local",
                           names.accounting_key(self.accounting))
            self._database()
        self._write_hosts()
        job_aws = self.objects.get("ConfigMap", {}).get(JOB_ENV_CONFIG_MAP)
        if job_aws is not None:  # the plan gives jobs an AWS identity: the twin's AWS answers it
            self._start_aws(job_aws["data"][aws.JOB_ENV_KEY])
        # Every pod's network namespace exists now: the policies apply before anything starts.
        for name, (kind, pod) in plans.items():
            self.pods[name] = TwinPod(name, pod.namespace, pod.labels, kind)
        self.apply_policies()
        if self.accounting is not None:
            self._start_database()
        for kind, pod in plans.values():
            if kind == "accounting":
                self._start_accounting(pod, builder)
        self._start_pod(controller, "controller", builder)
        self._wait("slurmctld answering on 6817", lambda: self._port_open(controller.name, 6817), 60,
                   str(self.state / "pods" / controller.name / "logs"))
        for kind, pod in plans.values():
            if kind == "nodeset":
                self.start_node(pod, builder)
            elif kind in ("login", "restapi"):
                self._start_pod(pod, kind, builder)
        for name in plans:
            self.pods[name].started.wait_started()
        self.builder = builder
        nodes = [name for name, (kind, _pod) in plans.items() if kind == "nodeset"]
        if nodes and any(kind == "login" for kind, _pod in plans.values()):
            self.wait_nodes(nodes, ("idle",))
        for job in self.objects.get("Job", {}).values():
            if job["metadata"]["name"] in self.stood_in_jobs:
                continue
            self.run_job(job, builder)
        for deployment in self.objects.get("Deployment", {}).values():
            if names.namespace_of(deployment) == self._namespace():
                self.run_deployment(deployment, builder)
        self.start_prometheus()
        self.save()
        if self.nodes_per_nodeset is None:
            self.controllers = scaling.Controllers(list(self.objects.get("ScaledObject", {}).values()),
                                                   self._namespace(), self, self.launch_delay_s, self.clock)
        self._platform_stop = threading.Event()  # a fresh one: up() may have stopped an earlier twin's loop
        self._platform = threading.Thread(target=self._platform_loop, name="twin-platform", daemon=True)
        self._platform.start()

    @property
    def platform_running(self) -> bool:
        return self._platform is not None and self._platform.is_alive()

    def _platform_loop(self) -> None:
        """The kubelet's probes and the cluster's controllers, once a second, until stop_platform()."""
        while not self._platform_stop.wait(1.0):
            for tick in (self.kubelet.tick, *([self.controllers.tick] if self.controllers else [])):
                try:
                    tick()
                except Exception as error:  # a controller retries next time; the error is kept for the tests
                    self.platform_errors.append(f"{type(error).__name__}: {error}")

    def stop_platform(self) -> None:
        """Stop the probes and the controllers; the pods run on as they are."""
        self._platform_stop.set()
        if self._platform is not None:
            self._platform.join(timeout=120)

    def _restart_by_kubelet(self, name: str) -> None:
        """The kubelet restarting a pod's container after a failed startup or liveness probe."""
        self.pods[name].started.kill()
        self.restart_node(name)

    def _pod_of_template(self, owner: Mapping[str, Any], kind: str, labels: Mapping[str, str]) -> PodPlan:
        template = owner["spec"]["template"]
        name = owner["metadata"]["name"]
        return pod_from_spec(name=f"{name}-twin", namespace=names.namespace_of(owner),
                             labels={**(template.get("metadata") or {}).get("labels", {}), **labels},
                             annotations=(template.get("metadata") or {}).get("annotations", {}),
                             spec=template["spec"], owner_kind=kind, owner_name=name)

    def _attach(self, name: str, namespace: str, labels: Mapping[str, str], kind: str,
                aliases: Iterable[str] = ()) -> None:
        """A new pod's network namespace, its names in /etc/hosts, and every pod's policies again."""
        with self.lock:
            link = self.network.links.get(name) or self.network.attach(name)
            self._add_host(str(link.address), name, *aliases)
            self._write_hosts()
            self.pods[name] = TwinPod(name, namespace, labels, kind)
            self.apply_policies()

    # --- what the controllers do (scripts/twin/scaling.py) ------------------------------------------------

    def start_scaled_node(self, nodeset: str, ordinal: int) -> str:
        """The NodeSet controller's pod `ordinal` on a node Karpenter just made, bound there (the pod-binding
        webhook copies the node's topology annotation onto it), started."""
        (spec,) = [n for n in self.nodesets if n["metadata"]["name"] == nodeset]
        pod = worker.nodeset_pod(spec, self.controller, ordinal)
        node = karpenter.node_for(pod, self._instance_type(self.objects["NodeSet"][nodeset]), self._vpc_cidr(),
                                  len(self.nodes))
        self.nodes[node["metadata"]["name"]] = node
        pod = karpenter.bind(pod, node)
        aliases = [f"{pod.name}.{pod.subdomain}.{pod.namespace}"] if pod.subdomain else []
        self._attach(pod.name, pod.namespace, pod.labels, "nodeset", aliases)
        self.plans[pod.name] = ("nodeset", pod)
        self.start_node(pod).started.wait_started()
        return pod.name

    def admin(self, command: str) -> str:
        """A Slurm command as root on the controller pod (the operator's calls to slurmrestd); its output."""
        return self.pod("controller").started.exec(["bash", "-c", command], env={"PATH": CONTAINER_PATH},
                                                   check=False, timeout=60).stdout

    def remove_node_pod(self, name: str) -> None:
        """A condemned pod deleted (its preStop marks the node down), its Slurm node record deleted
        (slurmcontrol.go DeleteNode), and its node given back by Karpenter once empty."""
        self.kubelet.forget(name)
        self.delete_pod(name)
        self.admin(f"scontrol delete nodename={name}")
        with self.lock:
            self.departed[name] = self.pods.pop(name)
            for node_name, node in list(self.nodes.items()):
                if node.get("spec", {}).get("podName") == name:
                    del self.nodes[node_name]
            self.apply_policies()

    def wait_pod_alive(self, name: str, timeout_s: float) -> None:
        self._wait(f"pod {name} running again", lambda: self.pod_alive(name), timeout_s,
                   str(self.state / "pods" / name / "logs"))

    def pod_alive(self, name: str) -> bool:
        pod = self.pods.get(name)
        return pod is not None and pod.running is not None and pod.running.alive()

    def run_deployment(self, deployment: Mapping[str, Any], builder: images.ImageBuilder | None = None) -> TwinPod:
        """One replica of a plan's Deployment (the Deployment controller's pod, without its hash label)."""
        pod = self._pod_of_template(deployment, "Deployment", {})
        self._attach(pod.name, pod.namespace, pod.labels, "deployment")
        started = self._start_pod(pod, "deployment", builder or self.builder)
        started.started.wait_started()
        return started

    def start_prometheus(self) -> TwinPod:
        """Prometheus (Debian's) as kube-prometheus-stack's would be labelled, scraping the Controller's
        ServiceMonitor paths on slurmctld and the plan's PodMonitor targets."""
        endpoint = pod_flows.prometheus_pod()
        name = "prometheus-twin"
        self._attach(name, endpoint.namespace, endpoint.labels, "prometheus")
        controller = self.pod("controller").name
        paths = [e.get("path", "/metrics") for e in
                 ((self.controller["spec"].get("metrics") or {}).get("serviceMonitor") or {}).get("endpoints", [])]
        targets = [autoscaling.Target(f"slurmctld{path.replace('/', '_')}",
                                      f"{self.network.links[controller].address}:6817", path) for path in paths]
        for monitor in self.objects.get("PodMonitor", {}).values():
            for pod in self.pods.values():
                if pod.namespace == names.namespace_of(monitor) and selects(monitor["spec"].get("selector"),
                                                                            pod.labels) and pod.running:
                    for endpoint_ in monitor["spec"]["podMetricsEndpoints"]:
                        port = self._container_port(pod.name, endpoint_["port"])
                        targets.append(autoscaling.Target(monitor["metadata"]["name"],
                                                          f"{self.network.links[pod.name].address}:{port}",
                                                          endpoint_.get("path", "/metrics")))
        directory = self.state / "prometheus"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "prometheus.yml").write_text(autoscaling.prometheus_config(targets))
        data = directory / "data"
        data.mkdir(exist_ok=True)
        shutil.chown(data, "prometheus", "prometheus")
        container = Container("prometheus", ["/usr/bin/prometheus", "--config.file=/etc/twin-prometheus/prometheus.yml",
                                             "--storage.tsdb.path=/prometheus",
                                             f"--web.listen-address=0.0.0.0:{autoscaling.PORT}"],
                              {"PATH": CONTAINER_PATH},
                              [Mount(str(directory), "/etc/twin-prometheus", readonly=True),
                               Mount(str(data), "/prometheus")], run_as=_ids("prometheus"))
        running = start(PodRuntimeSpec(name, name, ["/"], [container]), self.network.links[name],
                        self.state / "pods" / name, self.state / "hosts")
        self.pods[name].running = running
        running.wait_started()
        self._wait("Prometheus answering", lambda: self._port_open(name, autoscaling.PORT), 60,
                   str(running.directory / "logs"))
        return self.pods[name]

    def _container_port(self, pod: str, port: str | int) -> int:
        if isinstance(port, int):
            return port
        spec = json.loads((self.state / "pods" / pod / "plan-ports.json").read_text())
        return int(spec[port])

    def query(self, promql: str) -> float:
        """An instant PromQL query to the twin's Prometheus, read as KEDA reads it."""
        result = self.pod("prometheus").started.exec(["curl", "-s", autoscaling.query_url(promql)],
                                                     env={"PATH": CONTAINER_PATH})
        return autoscaling.sample(result.stdout, promql)

    def keda_replicas(self, nodeset: str) -> tuple[float, int]:
        """(the ScaledObject's query value, the replicas KEDA and the HPA would set) for `nodeset`."""
        scaled = next(o for o in self.objects.get("ScaledObject", {}).values()
                      if o["spec"]["scaleTargetRef"]["name"] == nodeset)
        value = self.query(autoscaling.trigger(scaled)["metadata"]["query"])
        return value, autoscaling.desired_replicas(scaled, value)

    def run_job(self, job: Mapping[str, Any], builder: images.ImageBuilder | None = None,
                timeout_s: float = 180) -> TwinPod:
        """One pod of a plan's Job, to completion. The Job controller labels its pods with the Job's name
        (kubernetes.io/docs/concepts/workloads/controllers/job: batch.kubernetes.io/job-name, job-name)."""
        name = job["metadata"]["name"]
        template = job["spec"]["template"]
        labels = {"batch.kubernetes.io/job-name": name, "job-name": name}
        pod = self._pod_of_template(job, "Job", labels)
        self._attach(pod.name, pod.namespace, pod.labels, "job")
        started = self._start_pod(pod, "job", builder or self.builder,
                                  restart_policy=template["spec"].get("restartPolicy", "Never"))
        logs = started.started.directory / "logs"
        self._wait(f"Job {name} to complete", lambda: started.started.succeeded() or not started.started.alive(),
                   timeout_s, str(logs))
        if not started.started.succeeded():
            tail = "".join(path.read_text()[-1500:] for path in sorted(logs.iterdir()))
            raise TwinError(f"Job {name} failed: {started.started.failure()} (see {logs}):\n{tail}")
        return started

    def sinfo_states(self) -> dict[str, str]:
        """Node -> state, as a person on the login pod sees them (`sinfo`)."""
        result = self.pod("login").started.exec(["sinfo", "-h", "-N", "-o", "%N %T"], env={"PATH": CONTAINER_PATH},
                                                check=False)
        return dict(line.split()[:2] for line in result.stdout.splitlines() if len(line.split()) >= 2)

    def wait_nodes(self, nodes: Iterable[str], states: tuple[str, ...], timeout_s: float = 120) -> None:
        """Until every node in `nodes` shows one of `states` in sinfo (a trailing * or ~ is ignored)."""
        wanted = list(nodes)

        def ready() -> bool:
            seen = self.sinfo_states()
            return all(seen.get(n, "").rstrip("*~#!%$@^-") in states for n in wanted)

        logs = ", ".join(str(self.state / "pods" / n / "logs") for n in wanted)
        self._wait(f"nodes {', '.join(wanted)} {'/'.join(states)} in sinfo", ready, timeout_s, logs)

    def _start_database(self) -> None:
        running = self.db.started
        running.wait_started()
        self._wait("MariaDB answering on 3306", lambda: self._port_open(running.name, database.PORT), 60,
                   str(running.directory / "logs"))
        running.exec(["mariadb", "--socket=/run/mysqld/mysqld.sock", "--batch"], env={"PATH": CONTAINER_PATH},
                     input_text=database.setup_sql(self.db_spec))

    def _start_accounting(self, pod: PodPlan, builder: images.ImageBuilder) -> None:
        extra: dict[str, list[Any]] = {}
        skip = []
        if self.db_ca is not None:
            # The Accounting's `db-ca` init container downloads the RDS CA bundle: the twin's CA goes there.
            for init in pod.init_containers:
                if any(m.mount_path == "/etc/slurm-eks/db-ca" for m in init.volume_mounts):
                    skip.append(init.name)
        running = self._start_pod(pod, "accounting", builder, skip_init=skip, extra_mounts=extra)
        if self.db_ca is not None:
            ca_dir = running.started.directory / "volumes" / "db-ca"
            if ca_dir.exists():
                shutil.copy(self.db_ca, ca_dir / "ca.pem")
        running.started.wait_started()
        self._wait("slurmdbd answering on 6819", lambda: self._port_open(pod.name, 6819), 60,
                   str(running.started.directory / "logs"))

    def start_node(self, pod: PodPlan, builder: images.ImageBuilder | None = None) -> TwinPod:
        """A NodeSet pod: the instance type's hardware, and what the platform gives it (standin_table.py)."""
        builder = builder or self.builder
        nodeset = self.objects["NodeSet"][pod.owner_name]
        instance = catalog.lookup(self._instance_type(nodeset))
        node = hardware.node_hardware(instance)
        directory = self.state / "pods" / pod.name
        hw_dir = directory / "hardware"
        hw_dir.mkdir(parents=True, exist_ok=True)
        (hw_dir / "hardware").write_text(node.conf_items() + "\n")
        extra = {c.name: [Mount(str(hw_dir), "/etc/slurm-eks-twin", readonly=True)] for c in pod.containers}
        started = self._start_pod(pod, "nodeset", builder, node=node, extra_mounts=extra)
        slurmd = pod.containers[0]
        link = self.network.links[pod.name]
        self.kubelet.watch(kubelet.ProbeState(pod.name, str(link.address), link.netns, slurmd.probes,
                                              {p.name: p.container_port for p in slurmd.ports}, self.clock()))
        return started

    def _instance_type(self, nodeset: Mapping[str, Any]) -> str:
        """The NodeSet's instance type, from the Karpenter NodePool its pods are scheduled on."""
        selector = nodeset["spec"]["template"]["spec"].get("nodeSelector") or {}
        partition = selector.get("node.slurm-eks.io/partition", nodeset["metadata"]["name"])
        for pool in self.objects.get("NodePool", {}).values():
            labels = pool["spec"]["template"].get("metadata", {}).get("labels", {})
            if labels.get("node.slurm-eks.io/partition") == partition:
                for requirement in pool["spec"]["template"]["spec"].get("requirements", []):
                    if requirement["key"] == "node.kubernetes.io/instance-type":
                        return str(requirement["values"][0])
        raise TwinError(f"NodeSet {nodeset['metadata']['name']}: no NodePool with its instance types in the plan")

    # --- use -----------------------------------------------------------------------------------------------

    def delete_pod(self, name: str) -> None:
        """What Kubernetes does when a pod is deleted (Karpenter taking its node back, a spot interruption): each
        container's preStop hook (Slinky's slurmd: mark the node down), then SIGTERM and the grace period."""
        _kind, plan = self.plans[name]
        running = self.pods[name].started
        for container in plan.containers:
            if container.pre_stop:
                running.exec(list(container.pre_stop), container=container.name, env={"PATH": CONTAINER_PATH},
                             check=False, timeout=60)
        running.terminate()

    def restart_node(self, name: str) -> TwinPod:
        """The NodeSet's controller making the pod again, under the same name (and so the same Slurm node)."""
        _kind, plan = self.plans[name]
        return self.start_node(plan)

    def pod(self, kind: str, index: int = 0) -> TwinPod:
        found = [p for p in list(self.pods.values()) if p.kind == kind]
        if len(found) <= index:
            raise TwinError(f"the twin has no {kind} pod #{index}")
        return found[index]

    def down(self) -> None:
        """Stop every pod of this twin (also one started by another process) and remove its network."""
        self.stop_platform()
        for pod in reversed(list(self.pods.values())):
            if pod.running is not None:
                pod.running.terminate()
        if getattr(self, "db", None) is not None and self.db.running is not None:
            self.db.running.terminate()
        stop_pods(self.state)
        self.network.teardown()

    def save(self) -> None:
        """What another process needs to reach this twin's pods: each pod's kind (state/twin.json)."""
        text = json.dumps({"pods": {name: pod.kind for name, pod in self.pods.items()}}, indent=1)
        (self.state / "twin.json").write_text(text + "\n")


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def stop_pods(state: Path, grace_s: float = 15.0) -> list[str]:
    """SIGTERM every pod whose first process is recorded under `state`, SIGKILL after `grace_s`."""
    running: dict[str, int] = {}
    for init in sorted(state.glob("pods/*/status/init.pid")):
        pid = int(init.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
            running[init.parents[1].name] = pid
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + grace_s
    while running and time.monotonic() < deadline:
        running = {name: pid for name, pid in running.items() if Path(f"/proc/{pid}").exists()}
        time.sleep(0.2)
    for pid in running.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return sorted(p.parents[1].name for p in state.glob("pods/*/status/init.pid"))


def enter_argv(state: Path, kind: str, argv: list[str], user: str | None = None,
               env: Mapping[str, str] | None = None) -> list[str]:
    """The command line that runs `argv` in the first pod of `kind` of the twin in `state` (nsenter)."""
    pods = json.loads((state / "twin.json").read_text())["pods"] if (state / "twin.json").exists() else {}
    names_ = [name for name, k in pods.items() if k == kind]
    if not names_:
        raise TwinError(f"no {kind} pod in the twin at {state}: start it with `slurm-eks local up --stack STACK`")
    pid_files = sorted((state / "pods" / names_[0] / "status").glob("*.pid"))
    mains = [p for p in pid_files if p.name != "init.pid" and not p.name.startswith(".")]
    if not mains:
        raise TwinError(f"pod {names_[0]} of the twin at {state} is not running")
    pid = int(mains[-1].read_text())
    inner = ["env", "-i", *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
    if user:
        inner = ["runuser", "-u", user, "--", *inner]
    return ["nsenter", "-t", str(pid), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--", *inner]
