"""The deploy check's *pod-network* rule: the pod-to-pod (and pod-to-address) flows the cluster needs, and the
ones it must never allow, each evaluated against the plan's NetworkPolicy objects.

The evaluator follows networking.k8s.io/v1 (kubernetes.io/docs/concepts/services-networking/
network-policies/ and the API reference): a pod is isolated for ingress (egress) when a policy of its namespace
selects it with that policyType; an isolated pod accepts (sends) only what some rule of such a policy admits by
peer (podSelector in the policy's namespace, namespaceSelector on the namespaces' labels, both in one peer =
AND, ipBlock with except) and by port (number, name of the receiving container's port, or a range up to
endPort; protocol TCP by default). A connection needs the sender's egress and the receiver's ingress.

Pods on the VPC CNI hold VPC addresses, and whether an ipBlock applies to pod addresses is left to the
implementation (the docs: ipBlocks "should be cluster-external IPs"): a needed flow to or from a pod must be
admitted by a selector, while a forbidden flow counts as open when an ipBlock could hold the pod's address.

The endpoints' labels are written here from the operators' and charts' sources, independently of
components/segmentation/network_policies.py, so a selector that misses its pods shows as a blocked flow.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.addons.mlflow import DB_USER_JOB as MLFLOW_DB_USER_JOB
from components.addons.mlflow import POD_LABELS as MLFLOW_POD
from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.findings import Finding
from components.kubernetes.charts import CERT_MANAGER, KEDA, KUBE_PROMETHEUS_STACK, MARIADB_OPERATOR, SLURM_OPERATOR
from components.kubernetes.label_selectors import policy_types, selects
from components.kubernetes.namespaces import ARGOCD, JUPYTERHUB, KUBERAY, MPI_OPERATOR, VOLCANO
from components.kubernetes.namespaces import NAME_LABEL as NAMESPACE_LABEL
from components.lifecycle.autoscaling import PROMETHEUS_RELEASE
from components.lifecycle.node_repair import METRICS_PORT as REPAIR_METRICS
from components.lifecycle.node_repair import POD_LABELS as REPAIR_POD
from components.names import ML_NAMESPACE, MLFLOW_NAMESPACE, MLFLOW_PORT, SLURM_NAMESPACE
from components.observability.dcgm import DCGM_RELEASE
from components.observability.neuron import LABELS as NEURON_MONITOR_POD
from components.observability.neuron import PORT as NEURON_MONITOR_PORT
from components.slinky.accounting_db import IN_CLUSTER_NAME
from components.slinky.accounting_db_user import SERVICE_ACCOUNT as DB_USER_JOB
from components.slinky.accounts import POD_LABELS as ACCOUNTS_POD
from components.slinky.lifecycle_settings import ec2_actions
from components.slinky.specs import CONTROLLER
from scripts.offline.plan_model import Plan, parse_json_text

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
ALL_PORTS = (1, 65535)
EPHEMERAL = (1024, 65535)  # SrunPortRange unset (Slurm 25.11 default): srun listens on any port the kernel gives
Labels = Mapping[str, str]
PROMETHEUS = "prometheus-kube-prometheus-prometheus"
# The labels the Job controller gives a Job's pods, valued with the Job's name, which for the accounts reconcile
# changes with its content (components/slinky/accounts.py job_name): any value stands for it here.
JOB_CONTROLLER_LABELS = ("batch.kubernetes.io/job-name", "job-name")
ACCOUNTS_JOB_EXAMPLE = "slurm-eks-accounts-0123456789"  # kube-prometheus-stack's Prometheus, release "prometheus"


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Labels
    ports: Mapping[str, int] = field(default_factory=dict)  # named container ports (for named policy ports)


@dataclass(frozen=True)
class Address:
    """Something that is not a pod: the control plane, RDS, the internet, IMDS; `cidrs` are where it may be."""

    name: str
    cidrs: tuple[str, ...]


Endpoint = Pod | Address


@dataclass(frozen=True)
class Flow:
    who: Endpoint
    whom: Endpoint
    protocol: str  # "TCP", "UDP" or "SCTP"
    ports: tuple[int, int]
    why: str
    needed: bool = True  # False: a flow that must stay blocked

    @property
    def label(self) -> str:
        low, high = self.ports
        what = str(low) if low == high else f"{low}-{high}"
        return f"{self.who.name} -> {self.whom.name} ({self.protocol.lower()} {what})"


# --- the evaluator ---------------------------------------------------------------------------------------

def _net(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr, strict=False)


def _within(inner: str, outer: str) -> bool:
    a, b = _net(inner), _net(outer)
    return a.version == b.version and a.subnet_of(b)  # type: ignore[arg-type]


def _overlaps(a: str, b: str) -> bool:
    x, y = _net(a), _net(b)
    return x.version == y.version and x.overlaps(y)  # type: ignore[arg-type]


def block_admits(block: Mapping[str, Any], cidrs: Sequence[str], certain: bool) -> bool:
    """certain: every address of `cidrs` is in the block and none in its except; else: some address may be."""
    cidr, excepted = block.get("cidr"), list(block.get("except") or [])
    if not isinstance(cidr, str) or "/" not in cidr:
        return False  # not known offline: admits nothing for sure (and the plan shows it)
    if certain:
        return bool(cidrs) and all(_within(c, cidr) and not any(_overlaps(c, e) for e in excepted) for c in cidrs)
    return any(_overlaps(c, cidr) and not any(_within(c, e) for e in excepted) for c in cidrs)


@dataclass(frozen=True)
class Cluster:
    """The policies of a plan, the namespaces' labels, and the addresses pods may have."""

    policies: tuple[Mapping[str, Any], ...]
    namespaces: Mapping[str, Labels]
    pod_cidrs: tuple[str, ...]

    def namespace_labels(self, namespace: str) -> Labels:
        return {NAMESPACE_LABEL: namespace, **self.namespaces.get(namespace, {})}

    def _isolating(self, pod: Pod, kind: str) -> list[Mapping[str, Any]]:
        return [p["spec"] for p in self.policies
                if p["metadata"].get("namespace") == pod.namespace and kind in policy_types(p["spec"])
                and selects(p["spec"].get("podSelector"), pod.labels)]

    def _peer(self, peer: Mapping[str, Any], policy_namespace: str, other: Endpoint, certain: bool) -> bool:
        if "ipBlock" in peer:
            cidrs = other.cidrs if isinstance(other, Address) else self.pod_cidrs
            return (isinstance(other, Address) or not certain) and block_admits(peer["ipBlock"], cidrs, certain)
        if not isinstance(other, Pod):
            return False
        if "namespaceSelector" in peer:
            in_namespace = selects(peer["namespaceSelector"], self.namespace_labels(other.namespace))
        else:
            in_namespace = other.namespace == policy_namespace
        return in_namespace and selects(peer.get("podSelector"), other.labels)

    def _ports(self, ports: Sequence[Mapping[str, Any]] | None, flow: Flow, certain: bool) -> bool:
        if not ports:
            return True
        spans = []
        for p in ports:
            if p.get("protocol", "TCP") != flow.protocol:
                continue
            port = p.get("port")
            if port is None:
                spans.append(ALL_PORTS)
            elif isinstance(port, str):  # a name: the receiving container's port of that name
                number = flow.whom.ports.get(port) if isinstance(flow.whom, Pod) else None
                if number is not None:
                    spans.append((number, number))
            else:
                spans.append((int(port), int(p.get("endPort", port))))
        low, high = flow.ports
        if not certain:
            return any(a <= high and b >= low for a, b in spans)
        reach = low
        for a, b in sorted(spans):
            if a > reach:
                break
            reach = max(reach, b + 1)
        return reach > high

    def side_allows(self, pod: Endpoint, other: Endpoint, kind: str, flow: Flow, certain: bool) -> bool:
        if not isinstance(pod, Pod):
            return True  # not a pod: no policy applies to it
        specs = self._isolating(pod, kind)
        if not specs:
            return True
        key, peers_key = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
        return any((not rule.get(peers_key) or any(self._peer(peer, pod.namespace, other, certain)
                                                   for peer in rule[peers_key]))
                   and self._ports(rule.get("ports"), flow, certain)
                   for spec in specs for rule in spec.get(key) or [])

    def allows(self, flow: Flow, certain: bool) -> bool:
        """certain: the policies surely let every port of the flow through; else: some part may pass."""
        return (self.side_allows(flow.who, flow.whom, "Egress", flow, certain)
                and self.side_allows(flow.whom, flow.who, "Ingress", flow, certain))


def evaluate(cluster: Cluster, flow: Flow) -> Finding | None:
    if flow.needed and not cluster.allows(flow, certain=True):
        blocked = "egress" if not cluster.side_allows(flow.who, flow.whom, "Egress", flow, True) else "ingress"
        side = flow.who if blocked == "egress" else flow.whom
        return Finding(rule="pod-network", severity="error", resource=flow.label,
                       message=f"{flow.why}; but no NetworkPolicy rule admits it on {side.name}'s {blocked}",
                       fix=f"add a rule for it to the {blocked} of {side.name} "
                       f"(components/segmentation/network_policies.py)")
    if not flow.needed and cluster.allows(flow, certain=False):
        return Finding(rule="pod-network", severity="error", resource=flow.label,
                       message=f"must stay blocked ({flow.why}), but the policies let it through",
                       fix="narrow the rule that admits it (components/segmentation/network_policies.py)")
    return None


# --- the endpoints, as the operators and charts label them -------------------------------------------------

def _app(name: str, instance: str, component: str | None = None, **more: str) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": instance, **more}
    if component:
        labels["app.kubernetes.io/component"] = component
    return labels


def endpoints(config: ClusterConfig) -> dict[str, Endpoint]:
    """One table of every endpoint, each pod's labels as its operator or chart sets them."""
    ns = SLURM_NAMESPACE
    found: dict[str, Endpoint] = {
        # SlinkyProject/slurm-operator v1.2.1 internal/builder/labels/labels.go (With<Component>Labels) and the
        # containers' named ports (internal/builder/*builder/*_app.go); every object here is named CONTROLLER.
        "slurmctld": Pod("slurmctld", ns, _app("slurmctld", CONTROLLER, "controller"), {"slurmctld": 6817}),
        "slurmdbd": Pod("slurmdbd", ns, _app("slurmdbd", CONTROLLER, "accounting"), {"slurmdbd": 6819}),
        "slurmrestd": Pod("slurmrestd", ns, _app("slurmrestd", CONTROLLER, "restapi"), {"slurmrestd": 6820}),
        "login": Pod("a login pod", ns, _app("login", CONTROLLER, "login"), {"login": 22}),
        # The accounts reconcile Job's pod (kubernetes.io/docs/concepts/workloads/controllers/job/: the Job
        # controller adds batch.kubernetes.io/job-name and job-name).
        "accounts job": Pod("the accounts reconcile Job", ns, {
            **ACCOUNTS_POD, **dict.fromkeys(JOB_CONTROLLER_LABELS, ACCOUNTS_JOB_EXAMPLE)}),
        # slurm-operator v1.2.1 helm/slurm-operator/templates/_helpers.tpl, _webhook.tpl (selector labels).
        "slurm-operator": Pod("the Slinky operator", SLURM_OPERATOR.namespace,
                              _app("slurm-operator", "slurm-operator")),
        "slurm-operator webhook": Pod("the Slinky webhook", SLURM_OPERATOR.namespace,
                                      _app("slurm-operator-webhook", "slurm-operator")),
        # kedacore/charts v2.20.2 keda/templates/{manager,metrics-server,webhooks}/deployment.yaml.
        "keda-operator": Pod("the KEDA operator", KEDA.namespace, {"app": "keda-operator", "name": "keda-operator",
                                                                   "app.kubernetes.io/name": "keda-operator"}),
        "keda metrics": Pod("KEDA's metrics server", KEDA.namespace, {
            "app": "keda-operator-metrics-apiserver", "app.kubernetes.io/name": "keda-operator-metrics-apiserver"}),
        "keda webhooks": Pod("KEDA's admission webhooks", KEDA.namespace, {"app": "keda-admission-webhooks"}),
        "prometheus": prometheus_pod(),
        "prometheus-operator": Pod("the Prometheus operator", KUBE_PROMETHEUS_STACK.namespace,
                                   {"app": "kube-prometheus-stack-operator", "release": "prometheus"}),
        # components/lifecycle/node_repair.py: the repair controller's Deployment (its pod template's labels).
        "repair": Pod("the repair controller", ns, dict(REPAIR_POD), {"metrics": REPAIR_METRICS}),
        # grafana-community/helm-charts grafana-12.10.4 charts/grafana/templates/_helpers.tpl selectorLabels (the
        # release is kube-prometheus-stack's), values.yaml service.targetPort 3000.
        "grafana": Pod("Grafana", KUBE_PROMETHEUS_STACK.namespace, _app("grafana", PROMETHEUS_RELEASE),
                       {"grafana": 3000}),
        # cert-manager v1.21.1 deploy/charts/cert-manager/templates/webhook-deployment.yaml.
        "cert-manager webhook": Pod("cert-manager's webhook", CERT_MANAGER.namespace,
                                    _app("webhook", "cert-manager", "webhook")),
        # The EKS CoreDNS add-on (upstream's k8s-app: kube-dns).
        "coredns": Pod("CoreDNS", "kube-system", {"k8s-app": "kube-dns", "eks.amazonaws.com/component": "coredns"}),
    }
    for name in config.partitions:
        found[f"slurmd {name}"] = Pod(f"slurmd of {name}", ns, _app(
            "slurmd", name, "worker", **{"slinky.slurm.net/cluster": CONTROLLER}), {"slurmd": 6818})
    if config.slurm.accounting.database == "rds":  # components/slinky/accounting_db_user.py: the Job's name
        found["db-user job"] = Pod("the database-user Job", ns, {"batch.kubernetes.io/job-name": DB_USER_JOB,
                                                                 "job-name": DB_USER_JOB})
    if config.slurm.accounting.database == "in-cluster":
        # mariadb-operator 26.6.0 pkg/builder/labels/labels.go WithMariaDBSelectorLabels.
        found["mariadb"] = Pod("the in-cluster MariaDB", ns, _app("mariadb", IN_CLUSTER_NAME))
        found["mariadb-operator"] = Pod("the mariadb-operator", MARIADB_OPERATOR.namespace,
                                        _app("mariadb-operator", "mariadb-operator"))
    if any(partition_instance(p).accelerator == "nvidia" for p in config.partitions.values()):
        # NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/templates/_helpers.tpl selectorLabels; values.yaml
        # service.port 9400.
        found["dcgm-exporter"] = Pod("dcgm-exporter", KUBE_PROMETHEUS_STACK.namespace,
                                     _app(DCGM_RELEASE, DCGM_RELEASE, DCGM_RELEASE), {"metrics": 9400})
    if any(partition_instance(p).accelerator == "neuron" for p in config.partitions.values()):
        found["neuron-monitor"] = Pod("neuron-monitor", KUBE_PROMETHEUS_STACK.namespace, dict(NEURON_MONITOR_POD),
                                      {"metrics": NEURON_MONITOR_PORT})
    found.update(k8s_job_endpoints(config))
    found.update(jupyterhub_endpoints(config))
    found.update(mlflow_endpoints(config))
    found.update(argocd_endpoints(config))
    return found


def k8s_job_endpoints(config: ClusterConfig) -> dict[str, Endpoint]:
    """The batch operators' controllers and the pods of the jobs they run in the `ml` namespace."""
    addons, found = config.addons, {}
    if addons.kuberay is not None:
        # ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/templates/deployment.yaml (nameOverride and
        # componentOverride kuberay-operator); ray-operator/controllers/ray/common/pod.go and utils/constant.go:
        # ray.io/cluster, ray.io/node-type head|worker, ray.io/group, app.kubernetes.io/created-by kuberay-operator.
        found["kuberay-operator"] = Pod("the KubeRay operator", KUBERAY, _app(
            "kuberay-operator", "kuberay-operator", "kuberay-operator"))
        ray = {"ray.io/cluster": "ray-ml-h100", "app.kubernetes.io/name": "kuberay",
               "app.kubernetes.io/created-by": "kuberay-operator"}
        found["ray head"] = Pod("a Ray head", ML_NAMESPACE, {**ray, "ray.io/node-type": "head",
                                                            "ray.io/group": "headgroup"})
        found["ray worker"] = Pod("a Ray worker", ML_NAMESPACE, {**ray, "ray.io/node-type": "worker",
                                                                "ray.io/group": "workers"})
    if addons.mpi_operator is not None:
        # kubeflow/mpi-operator v0.8.0 deploy/v2beta1/mpi-operator.yaml (Deployment template labels);
        # pkg/controller/mpi_job_controller.go defaultLabels + JobRoleLabel launcher|worker.
        found["mpi-operator"] = Pod("the MPI Operator", MPI_OPERATOR, {
            "app": "mpi-operator", "app.kubernetes.io/component": "mpijob", "app.kubernetes.io/name": "mpi-operator",
            "kustomize.component": "mpi-operator"})
        mpi = {"training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": "nccl"}
        found["mpi launcher"] = Pod("an MPIJob launcher", ML_NAMESPACE, {
            **mpi, "training.kubeflow.org/job-role": "launcher"})
        found["mpi worker"] = Pod("an MPIJob worker", ML_NAMESPACE, {
            **mpi, "training.kubeflow.org/job-role": "worker", "training.kubeflow.org/replica-index": "0"})
    if addons.volcano is not None:
        # volcano-sh/volcano v1.15.1 installer/helm/chart/volcano/templates/{admission,controllers,scheduler}.yaml;
        # a Job's pods: staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/labels.go JobNameKey, TaskSpecKey.
        found["volcano admission"] = Pod("Volcano's admission webhook", VOLCANO, {"app": "volcano-admission"})
        found["volcano controller"] = Pod("Volcano's controllers", VOLCANO, {"app": "volcano-controller"})
        found["volcano scheduler"] = Pod("Volcano's scheduler", VOLCANO, {"app": "volcano-scheduler"})
        found["volcano job"] = Pod("a Volcano Job's pod", ML_NAMESPACE, {
            "volcano.sh/job-name": "gang", "volcano.sh/task-spec": "worker", "volcano.sh/queue-name": "ml-h100"})
    return found


def k8s_job_flows(e: Mapping[str, Endpoint], control_plane: Address, world: Address, imds: Address,
                  forbidden: Sequence[tuple[Endpoint, int]]) -> Iterator[Flow]:
    """The operators read the API; a job's pods reach each other on any port and the internet, and no Slurm,
    cluster or node service; Slurm's jobs do not reach them."""
    for key in ("kuberay-operator", "mpi-operator", "volcano admission", "volcano controller", "volcano scheduler"):
        if key in e:
            yield Flow(e[key], control_plane, "TCP", (443, 443), "an operator reads and writes the Kubernetes API")
    if "volcano admission" in e:
        yield Flow(control_plane, e["volcano admission"], "TCP", (8443, 8443), "the API server calls Volcano's webhook")
    jobs = [[e[k] for k in keys if k in e] for keys in (("ray head", "ray worker"), ("mpi launcher", "mpi worker"),
                                                        ("volcano job",))]
    for group in jobs:
        for who in group:
            for whom in group:
                yield Flow(who, whom, "TCP", ALL_PORTS, "NCCL sockets, mpirun's SSH, Ray's GCS and workers")
    for pod in (p for group in jobs for p in group):
        yield Flow(pod, world, "TCP", ALL_PORTS, "jobs read data and models from S3 and the internet")
        for target, port in (*forbidden, (control_plane, 443), (imds, 80)):
            yield Flow(pod, target, "TCP", (port, port), "a Kubernetes job reaches no Slurm, cluster or node service",
                       needed=False)
        for compute in (p for key, p in e.items() if key.startswith("slurmd ")):
            yield Flow(pod, compute, "TCP", ALL_PORTS, "a Kubernetes job reaches no slurmd", needed=False)
            yield Flow(compute, pod, "TCP", ALL_PORTS, "a Slurm job reaches no Kubernetes job", needed=False)


# --- the flow table ------------------------------------------------------------------------------------------

def flows(config: ClusterConfig, e: Mapping[str, Endpoint], vpc_cidrs: tuple[str, ...],
          srun: tuple[int, int] = EPHEMERAL) -> Iterator[Flow]:
    """What the cluster needs (and must not allow), each with why; `srun`: the ports srun listens on."""
    slurmctld, slurmdbd, slurmrestd, login = e["slurmctld"], e["slurmdbd"], e["slurmrestd"], e["login"]
    computes = [p for key, p in e.items() if key.startswith("slurmd ")]
    control_plane = Address("the EKS control plane", vpc_cidrs)
    world = Address("a public address (S3, model hubs)", ("192.0.2.0/24",))  # RFC 5737 TEST-NET-1
    imds = Address("IMDS", ("169.254.169.254/32",))
    in_cluster = "mariadb" in e
    database = e["mariadb"] if in_cluster else Address("RDS (slurmdbd's MariaDB)", vpc_cidrs)

    for pod in (p for p in e.values() if isinstance(p, Pod) and p.namespace != "kube-system"):
        for protocol in ("UDP", "TCP"):
            yield Flow(pod, e["coredns"], protocol, (53, 53), "every pod resolves names with CoreDNS")
    for key in ("slurmctld", "slurmdbd", "slurmrestd", "slurm-operator", "keda-operator", "prometheus", "repair"):
        yield Flow(e[key], control_plane, "TCP", (443, 443), "controllers and Slurm daemons read the Kubernetes API")
    for key, port in (("slurm-operator webhook", 9443), ("keda webhooks", 9443), ("keda metrics", 6443),
                      ("cert-manager webhook", 10250), ("prometheus-operator", 10250)):
        yield Flow(control_plane, e[key], "TCP", (port, port), "the API server calls a webhook or aggregated API")
    for client in (*computes, login, slurmrestd, slurmdbd, e["accounts job"], e["prometheus"], e["repair"]):
        yield Flow(client, slurmctld, "TCP", (6817, 6817), "Slurm clients, slurmd and Prometheus reach slurmctld")
    for client in (slurmctld, login, slurmrestd, e["accounts job"], e["repair"]):
        yield Flow(client, slurmdbd, "TCP", (6819, 6819), "accounting: slurmctld, sacct/sacctmgr, slurmrestd")
    yield Flow(slurmdbd, database, "TCP", (3306, 3306), "slurmdbd writes accounting to MariaDB")
    if in_cluster:
        yield Flow(e["mariadb-operator"], database, "TCP", (3306, 3306), "the operator creates the database and user")
    else:
        yield Flow(e["db-user job"], database, "TCP", (3306, 3306), "the Job creates slurmdbd's user on RDS")
        for client in (e["db-user job"], slurmdbd):
            yield Flow(client, world, "TCP", (443, 443), "Secrets Manager, STS and the RDS CA bundle over HTTPS")
    yield Flow(e["slurm-operator"], slurmrestd, "TCP", (6820, 6820), "the operator drains nodes through slurmrestd")
    yield Flow(e["keda-operator"], e["prometheus"], "TCP", (9090, 9090), "KEDA's scalers query Prometheus")
    yield Flow(e["prometheus"], e["repair"], "TCP", (REPAIR_METRICS, REPAIR_METRICS),
               "Prometheus scrapes the repair controller (replacements, drained nodes, bandwidth)")
    yield Flow(e["grafana"], e["prometheus"], "TCP", (9090, 9090), "Grafana's dashboards query Prometheus")
    yield Flow(e["grafana"], world, "TCP", (443, 443), "Grafana's CloudWatch data source (FSx) and STS over HTTPS")
    if ec2_actions(config):
        yield Flow(e["repair"], world, "TCP", (443, 443),
                   "the lifecycle controller reads EC2 topology and Capacity Blocks (STS, EC2 over HTTPS)")
    for key, port in (("dcgm-exporter", 9400), ("neuron-monitor", NEURON_MONITOR_PORT)):
        if key in e:
            yield Flow(e["prometheus"], e[key], "TCP", (port, port), "Prometheus scrapes the accelerator exporters")
    for cidr in (*config.slurm.login.allowed_cidrs, *vpc_cidrs):
        yield Flow(Address(f"SSH clients {cidr}", (cidr,)), login, "TCP", (22, 22), "SSH to the login pods via the NLB")
    # srun listens on `srun` (SrunPortRange) on a login pod, and on a slurmd pod when a batch script runs it
    # (the batch script runs on the job's first node): slurmctld calls it back there (time-limit warning,
    # node failure, step complete: Slurm 25.11 src/stepmgr/srun_comm.c) and slurmstepds send the step's I/O.
    for compute in computes:
        yield Flow(slurmctld, compute, "TCP", (6818, 6818), "slurmctld starts jobs on slurmd")
        yield Flow(slurmctld, compute, "TCP", srun, "slurmctld calls back srun in a batch script (SrunPortRange)")
        yield Flow(login, compute, "TCP", (6818, 6818), "srun on a login pod launches steps")
        yield Flow(compute, login, "TCP", srun, "step I/O back to srun on a login pod (SrunPortRange)")
        yield Flow(compute, world, "TCP", ALL_PORTS, "jobs read data and models from S3 and the internet")
        for peer in computes:
            yield Flow(compute, peer, "TCP", ALL_PORTS, "NCCL sockets, PMIx and step fan-out between slurmd pods")
        for target, port in ((slurmdbd, 6819), (slurmrestd, 6820), (e["prometheus"], 9090), (database, 3306),
                             (e["repair"], REPAIR_METRICS),
                             (e["slurm-operator webhook"], 9443), (e["cert-manager webhook"], 10250),
                             (e["keda metrics"], 6443), (control_plane, 443), (imds, 80)):
            yield Flow(compute, target, "TCP", (port, port), "a job reaches no Slurm, cluster or node service",
                       needed=False)
    yield Flow(slurmctld, login, "TCP", srun, "slurmctld calls srun on a login pod back (allocation, timeouts; "
               "SrunPortRange)")
    for target, port in ((database, 3306), (slurmrestd, 6820), (e["prometheus"], 9090), (imds, 80)):
        yield Flow(login, target, "TCP", (port, port), "a login shell reaches no database, API or node service",
                   needed=False)
    yield from k8s_job_flows(e, control_plane, world, imds, (
        (slurmctld, 6817), (slurmdbd, 6819), (slurmrestd, 6820), (login, 22), (e["prometheus"], 9090),
        (database, 3306), (e["slurm-operator webhook"], 9443), (e["cert-manager webhook"], 10250),
        *(((e["volcano admission"], 8443),) if "volcano admission" in e else ())))
    yield from jupyterhub_flows(e, control_plane, world, imds, database)
    yield from mlflow_flows(e, control_plane, imds, world, database)
    yield from argocd_flows(config, e, control_plane, world)


def prometheus_pod() -> Pod:
    """prometheus-operator v0.93.0 pkg/prometheus/server/operator.go makeSelectorLabels; the Prometheus that
    kube-prometheus-stack names <release>-kube-prometheus-prometheus (the twin runs one with these labels)."""
    return Pod("Prometheus", KUBE_PROMETHEUS_STACK.namespace, {
        **_app("prometheus", PROMETHEUS), "app.kubernetes.io/managed-by": "prometheus-operator",
        "prometheus": PROMETHEUS, "operator.prometheus.io/name": PROMETHEUS}, {"web": 9090})


def jupyterhub_endpoints(config: ClusterConfig) -> dict[str, Endpoint]:
    """zero-to-jupyterhub 4.4.0 templates/{hub,proxy}/deployment.yaml pod labels (jupyterhub.matchLabelsLegacyAnd
    Modern, release `jupyterhub`, plus its network-access labels); notebooks as KubeSpawner 7.0.0 labels them
    (spawner.py _build_common_labels with the chart's common_labels, files/hub/jupyterhub_config.py, and
    singleuser.extraLabels' hub.jupyter.org/network-access-hub)."""
    if config.addons.jupyterhub is None:
        return {}
    ns = JUPYTERHUB

    def z2jh(component: str, **more: str) -> dict[str, str]:
        return {"app": "jupyterhub", "release": "jupyterhub", "component": component,
                **_app("jupyterhub", "jupyterhub", component), **more}
    return {
        "jupyterhub hub": Pod("the JupyterHub hub", ns, z2jh("hub", **{
            "hub.jupyter.org/network-access-proxy-api": "true", "hub.jupyter.org/network-access-singleuser": "true"}),
            {"http": 8081}),
        "jupyterhub proxy": Pod("the JupyterHub proxy", ns, z2jh("proxy", **{
            "hub.jupyter.org/network-access-hub": "true"}), {"http": 8000, "api": 8001}),
        "notebook": Pod("a notebook server", ns, {**z2jh("singleuser-server"), "app.kubernetes.io/managed-by":
                                                  "kubespawner", "hub.jupyter.org/username": "alice",
                                                  "hub.jupyter.org/network-access-hub": "true"}),
    }


def jupyterhub_flows(e: Mapping[str, Endpoint], control_plane: Address, world: Address, imds: Address,
                     database: Endpoint) -> Iterator[Flow]:
    if "notebook" not in e:
        return
    hub, proxy, notebook = e["jupyterhub hub"], e["jupyterhub proxy"], e["notebook"]
    yield Flow(hub, control_plane, "TCP", (443, 443), "the hub creates notebook pods (KubeSpawner)")
    yield Flow(proxy, hub, "TCP", (8081, 8081), "the proxy routes sign-in and the hub's pages")
    yield Flow(hub, proxy, "TCP", (8001, 8001), "the hub sets the proxy's routes")
    yield Flow(proxy, notebook, "TCP", (8888, 8888), "people reach their notebook through the proxy")
    yield Flow(hub, notebook, "TCP", (8888, 8888), "the hub checks a notebook is up")
    yield Flow(notebook, hub, "TCP", (8081, 8081), "a notebook reports activity to the hub's API")
    yield Flow(notebook, e["slurmrestd"], "TCP", (6820, 6820), "notebooks submit Slurm jobs with the user's JWT")
    yield Flow(notebook, world, "TCP", (443, 443), "notebooks install packages and read models")
    for target, port in ((e["slurmctld"], 6817), (e["slurmdbd"], 6819), (database, 3306), (imds, 80),
                         (control_plane, 443), (e["prometheus"], 9090), (e["login"], 22)):
        yield Flow(notebook, target, "TCP", (port, port), "a notebook reaches Slurm only through slurmrestd, and "
                   "no database, cluster or node service", needed=False)
    for compute in (p for key, p in e.items() if key.startswith("slurmd ")):
        yield Flow(compute, notebook, "TCP", ALL_PORTS, "a Slurm job reaches no notebook", needed=False)


def mlflow_endpoints(config: ClusterConfig) -> dict[str, Endpoint]:
    """addons.mlflow: the tracking server's pod as its Deployment labels it (components/addons/mlflow.py POD_LABELS,
    the container port `http`) and, on RDS, the database-user Job's pods (the Job controller's labels)."""
    mlflow = config.addons.mlflow
    if mlflow is None:
        return {}
    found: dict[str, Endpoint] = {
        "mlflow": Pod("the MLflow tracking server", MLFLOW_NAMESPACE, dict(MLFLOW_POD), {"http": MLFLOW_PORT})}
    if mlflow.database == "rds":
        found["mlflow db-user job"] = Pod("MLflow's database-user Job", MLFLOW_NAMESPACE,
                                          dict.fromkeys(JOB_CONTROLLER_LABELS, MLFLOW_DB_USER_JOB))
    return found


# Who logs to MLflow: Slurm's jobs (slurmd), login shells, notebooks. Every other pod is kept off the server.
MLFLOW_CLIENTS = ("login", "notebook")


def mlflow_flows(e: Mapping[str, Endpoint], control_plane: Address, imds: Address, world: Address,
                 database: Endpoint) -> Iterator[Flow]:
    if "mlflow" not in e:
        return
    server, port = e["mlflow"], (MLFLOW_PORT, MLFLOW_PORT)
    clients = [p for key, p in e.items() if key.startswith("slurmd ") or key in MLFLOW_CLIENTS]
    for client in clients:
        yield Flow(client, server, "TCP", port, "jobs, login shells and notebooks log runs and models to MLflow")
    yield Flow(server, world, "TCP", (443, 443), "the server writes artifacts to S3, with STS for its IRSA role")
    if "mlflow db-user job" in e:
        job = e["mlflow db-user job"]
        yield Flow(server, database, "TCP", (3306, 3306), "the server keeps runs and the registry on RDS")
        yield Flow(job, database, "TCP", (3306, 3306), "the Job creates MLflow's database and user on RDS")
        yield Flow(job, world, "TCP", (443, 443), "Secrets Manager, STS and the RDS CA bundle over HTTPS")
    else:
        yield Flow(server, database, "TCP", (3306, 3306), "the server's SQLite is on its own volume: it needs "
                   "no database of the cluster's", needed=False)
    others = (p for key, p in e.items() if isinstance(p, Pod) and p not in clients and not key.startswith("mlflow"))
    for other in others:
        yield Flow(other, server, "TCP", port, "only jobs, login shells and notebooks reach MLflow", needed=False)
    for target, target_port in ((control_plane, 443), (imds, 80), (e["slurmctld"], 6817), (e["slurmdbd"], 6819),
                                (e["slurmrestd"], 6820), (e["login"], 22)):
        yield Flow(server, target, "TCP", (target_port, target_port), "the server reaches no Kubernetes API, node "
                   "or Slurm service", needed=False)


def argocd_endpoints(config: ClusterConfig) -> dict[str, Endpoint]:
    """Gitops mode: argoproj/argo-helm argo-cd 10.1.1 templates/_common.tpl argo-cd.selectorLabels (name
    argocd-<component>, instance the release `argocd`) and values.yaml containerPorts (repo-server 8081, redis
    6379, server 8080)."""
    if config.gitops is None:
        return {}
    return {f"argocd {c}": Pod(f"Argo CD's {c}", ARGOCD, _app(f"argocd-{c}", "argocd", c))
            for c in ("application-controller", "server", "repo-server", "redis")}


def argocd_flows(config: ClusterConfig, e: Mapping[str, Endpoint], control_plane: Address,
                 world: Address) -> Iterator[Flow]:
    if config.gitops is None:
        return
    controller, server, repo, redis = (e[f"argocd {c}"] for c in ("application-controller", "server",
                                                                  "repo-server", "redis"))
    for pod in (controller, server):
        yield Flow(pod, control_plane, "TCP", (443, 443), "Argo CD reads and applies the cluster's objects")
        yield Flow(pod, repo, "TCP", (8081, 8081), "Argo CD renders the charts and manifests on its repo server")
        yield Flow(pod, redis, "TCP", (6379, 6379), "Argo CD caches its state in redis")
    for port in (443, 22) if config.gitops.uses_ssh else (443,):
        yield Flow(repo, world, "TCP", (port, port), "the repo server clones the Git repository and pulls charts")
    for compute in (p for key, p in e.items() if key.startswith("slurmd ")):
        for target, port in ((repo, 8081), (redis, 6379), (server, 8080)):
            yield Flow(compute, target, "TCP", (port, port), "a job reaches no Argo CD component", needed=False)


def cluster_of(plan: Plan, pod_cidrs: tuple[str, ...]) -> Cluster:
    policies = tuple(r.inputs for r in plan.of_type(NETWORK_POLICY))
    namespaces = {r.inputs["metadata"]["name"]: (r.inputs["metadata"].get("labels") or {})
                  for r in plan.of_type(NAMESPACE) if isinstance(r.inputs.get("metadata"), dict)}
    return Cluster(policies, namespaces, pod_cidrs)


def enforcement_findings(plan: Plan) -> Iterator[Finding]:
    """NetworkPolicies do nothing unless the VPC CNI's node agent enforces them: the vpc-cni add-on's
    configuration value enableNetworkPolicy "true" (docs.aws.amazon.com/eks/latest/userguide/
    cni-network-policy-configure.html), or pulumi-eks 4.4's vpcCniOptions.enableNetworkPolicy."""
    addons = [r for r in plan.of_type("aws:eks/addon:Addon") if r.inputs.get("addonName") == "vpc-cni"]
    settings = [parse_json_text(r.inputs.get("configurationValues")) or {} for r in addons]
    settings += [r.inputs.get("vpcCniOptions") or {} for r in plan.of_type("eks:index:Cluster")]
    if not any(isinstance(s, Mapping) and s.get("enableNetworkPolicy") in (True, "true") for s in settings):
        yield Finding(rule="pod-network", severity="error", resource="the VPC CNI (vpc-cni add-on)",
                      message="no vpc-cni add-on or cluster enables enableNetworkPolicy: the NetworkPolicies are not "
                      "enforced and every pod can reach every other",
                      fix='set the vpc-cni add-on\'s configuration_values {"enableNetworkPolicy": "true"}')


def srun_ports(plan: Plan) -> tuple[int, int]:
    """Where srun listens: the plan's slurm.conf (the Controller's extraConf lines, which the operator appends
    to slurm.conf) `SrunPortRange=<min>-<max>` (slurm.conf(5)), read from the plan rather than from
    components/, so a policy that misses the range the cluster really uses shows; unset, any port (EPHEMERAL)."""
    for r in plan.resources:
        if r.is_manifest and r.inputs.get("kind") == "Controller":
            extra = (r.inputs.get("spec") or {}).get("extraConf") or ""
            for line in extra.splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "SrunPortRange":
                    low, _, high = value.strip().partition("-")
                    return int(low), int(high)
    return EPHEMERAL


def check(plan: Plan, config: ClusterConfig) -> list[Finding]:
    vpc_cidrs = tuple(r.inputs["cidrBlock"] for r in plan.of_type("aws:ec2/vpc:Vpc") if r.inputs.get("cidrBlock"))
    vpc_cidrs = vpc_cidrs or ((config.network.vpc_cidr,) if config.network.vpc_cidr else ())
    cluster = cluster_of(plan, vpc_cidrs)
    found = list(enforcement_findings(plan))
    found += [f for flow in flows(config, endpoints(config), vpc_cidrs, srun_ports(plan))
              if (f := evaluate(cluster, flow))]
    return found
