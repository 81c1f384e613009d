"""Segmentation: in every namespace the program creates, a NetworkPolicy that denies all traffic to and from
every pod, then one policy per flow the cluster needs (scripts/checks/pod_flows.py evaluates them).

Semantics (kubernetes.io/docs/concepts/services-networking/network-policies/): a pod selected by any policy
with a policyType is isolated in that direction, and a connection needs both the sender's egress and the
receiver's ingress. Enforcement on EKS is the VPC CNI's network policy agent, which is off unless the vpc-cni
add-on has `enableNetworkPolicy` (docs.aws.amazon.com/eks/latest/userguide/cni-network-policy.html).

Pods on the VPC CNI take addresses of the VPC, so an ipBlock of the VPC CIDR also holds every pod: each is
paired with egress rules that keep job pods (slurmd, login) off it. The control plane (webhook calls) and RDS
are not pods: they are reached by ipBlock. Lustre is mounted by the node's kernel (the FSx CSI node plugin,
host network), so pod policies never see it.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.addons.k8s_operator_charts import KUBERAY, MPI_OPERATOR_POD, VOLCANO, VOLCANO_ADMISSION_PORT
from components.addons.mlflow import DB_USER_JOB as MLFLOW_DB_USER_JOB
from components.addons.mlflow import POD_LABELS as MLFLOW_POD
from components.config.cluster import ClusterConfig
from components.kubernetes.charts import (
    CERT_MANAGER,
    KEDA,
    KUBE_PROMETHEUS_STACK,
    MARIADB_OPERATOR,
    SLURM_OPERATOR,
)
from components.kubernetes.namespaces import ARGOCD, JUPYTERHUB
from components.kubernetes.namespaces import MPI_OPERATOR as MPI_OPERATOR_NAMESPACE
from components.kubernetes.namespaces import NAME_LABEL as NAMESPACE_LABEL
from components.lifecycle.node_repair import METRICS_PORT as REPAIR_METRICS
from components.lifecycle.node_repair import POD_LABELS as REPAIR_POD
from components.names import ML_NAMESPACE, MLFLOW_NAMESPACE, MLFLOW_PORT, SLURM_NAMESPACE
from components.slinky.accounting_db_user import SERVICE_ACCOUNT as DB_USER_JOB
from components.slinky.lifecycle_settings import ec2_actions
from components.slinky.ports import MARIADB, SLURMCTLD, SLURMD, SLURMDBD, SLURMRESTD, SSH
from components.slinky.slurm_conf import SRUN_PORT_RANGE

Peer = dict[str, Any]
Rule = dict[str, Any]

NAME_LABEL = "app.kubernetes.io/name"
KUBE_SYSTEM = "kube-system"
# CoreDNS, the EKS add-on: the `k8s-app: kube-dns` label of upstream's manifest
# (kubernetes.io/docs/tasks/administer-cluster/dns-debugging-resolution/, "kubectl get pods -l k8s-app=kube-dns").
DNS_PEER: Peer = {"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: KUBE_SYSTEM}},
                  "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
# Whether a policy sees a Service's ClusterIP or its endpoint is implementation-defined (the Kubernetes docs:
# "it is not defined whether this happens before or after NetworkPolicy processing"), so the API is admitted
# at both: the `kubernetes` Service's endpoints (control-plane ENIs in the VPC) and the Service range, which
# EKS picks from these two when none is set (docs.aws.amazon.com/eks/latest/APIReference/
# API_KubernetesNetworkConfigRequest.html, serviceIpv4Cidr).
SERVICE_CIDRS = ("10.100.0.0/16", "172.20.0.0/16")
# Link-local (IMDS 169.254.169.254 among it): the node's credentials. The nodes' hop limit of 1 stops pods
# too; this is the second lock. The VPC CNI honours `except` since its policy agent v1.0.4
# (aws/aws-network-policy-agent#92).
LINK_LOCAL = "169.254.0.0/16"
ANY_PORT_ABOVE_1023 = {"protocol": "TCP", "port": 1024, "endPort": 65535}

# srun listens on SrunPortRange (components/slinky/ports.py): slurmctld's callbacks and the step's I/O and
# messages from slurmstepd reach it there, on a login pod or, for an srun inside a batch script, on a slurmd pod.
SRUN_PORTS = {"protocol": "TCP", "port": SRUN_PORT_RANGE[0], "endPort": SRUN_PORT_RANGE[1]}
# The pods' `app.kubernetes.io/name` (slurm-operator v1.2.1 internal/builder/labels/labels.go: slurmctld,
# slurmd, slurmdbd, slurmrestd, login; each pod template carries its component's labels).
SLURM_APPS = ("slurmctld", "slurmd", "slurmdbd", "slurmrestd", "login")
# Pods that run people's code (jobs on slurmd, shells on login) need no Kubernetes API; leaving them out also
# keeps them off the webhooks, whose Services listen on 443 too.
JOB_SHELLS_EXCLUDED = {"matchExpressions": [{"key": NAME_LABEL, "operator": "NotIn", "values": ["slurmd", "login"]}]}
# Pods of a Job carry `batch.kubernetes.io/job-name` (kubernetes.io/docs/concepts/workloads/controllers/job/):
# in the slurm namespace the accounts reconcile (components/slinky/accounts.py, a Slurm client) and, on RDS,
# the database-user Job.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_PODS: Peer = {"podSelector": {"matchExpressions": [{"key": JOB_NAME_LABEL, "operator": "Exists"}]}}
# slurm-operator v1.2.1 helm/slurm-operator/templates/_helpers.tpl selectorLabels: the chart's name; its
# operator calls slurmrestd (internal/controller/slurmclient/slurmclient_sync.go getRestApiServer).
SLURM_OPERATOR_POD = {NAME_LABEL: "slurm-operator"}
# kedacore/charts v2.20.2 keda/templates/manager/deployment.yaml: operator.name keda-operator.
KEDA_OPERATOR_POD = {NAME_LABEL: "keda-operator"}
# prometheus-operator v0.93.0 pkg/prometheus/server/operator.go makeSelectorLabels: app.kubernetes.io/name
# prometheus on the pods of every Prometheus it runs; 9090 is its web port (components/lifecycle/autoscaling.py).
PROMETHEUS_POD = {NAME_LABEL: "prometheus"}
PROMETHEUS_PORT = 9090
# grafana-community/helm-charts grafana-12.10.4 charts/grafana/templates/_helpers.tpl selectorLabels, under
# kube-prometheus-stack's release `prometheus`.
GRAFANA_POD = {NAME_LABEL: "grafana", "app.kubernetes.io/instance": "prometheus"}
# mariadb-operator 26.6.0 pkg/builder/labels/labels.go WithMariaDBSelectorLabels: name mariadb, instance <name>.
MARIADB_POD = {NAME_LABEL: "mariadb"}
# What Prometheus scrapes outside its namespace (kube-prometheus-stack 88.2.0's default ServiceMonitors):
# kubelets (10250) and node-exporter (9100, host network) at node addresses, CoreDNS metrics (9153).
NODE_SCRAPE_PORTS = (10250, 9100)
COREDNS_METRICS = 9153
# Ports the API server calls in each chart's namespace (webhooks, aggregated APIs): cert-manager v1.21.1
# values.yaml webhook.securePort 10250; slurm-operator v1.2.1 values.yaml webhook.serverPort 9443; kedacore/
# charts v2.20.2 keda/values.yaml webhooks.port (default 9443) and metricsServer portHttpsTarget 6443;
# kube-prometheus-stack 88.2.0 values.yaml prometheusOperator.tls.internalPort 10250; mariadb-operator 26.6.0
# deploy/charts/mariadb-operator/values.yaml webhook.port 9443.
CONTROL_PLANE_PORTS: dict[str, tuple[int, ...]] = {
    CERT_MANAGER.namespace: (10250,),
    SLURM_OPERATOR.namespace: (9443,),
    KEDA.namespace: (9443, 6443),
    KUBE_PROMETHEUS_STACK.namespace: (10250,),
    MARIADB_OPERATOR.namespace: (9443,),
    VOLCANO.namespace: (VOLCANO_ADMISSION_PORT,),
}


def tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in ports]


def pods(app: str | dict[str, str], namespace: str | None = None) -> Peer:
    """Pods by their name label (a Slurm app) or labels, in `namespace` (default: the policy's own)."""
    labels = {NAME_LABEL: app} if isinstance(app, str) else app
    peer: Peer = {"podSelector": {"matchLabels": labels}}
    if namespace is not None:
        peer["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: namespace}}
    return peer


def namespace_peer(namespace: str) -> Peer:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: namespace}}}


def block(cidr: pulumi.Input[str], *excepted: pulumi.Input[str]) -> Peer:
    return {"ipBlock": {"cidr": cidr, **({"except": list(excepted)} if excepted else {})}}


def policy(namespace: str, name: str, selector: dict[str, Any], ingress: list[Rule] | None = None,
           egress: list[Rule] | None = None) -> dict[str, Any]:
    """One NetworkPolicy; policyTypes only for the directions it has rules for, so it never isolates more."""
    spec: dict[str, Any] = {"podSelector": selector, "policyTypes": []}
    if ingress is not None:
        spec["policyTypes"].append("Ingress")
        spec["ingress"] = ingress
    if egress is not None:
        spec["policyTypes"].append("Egress")
        spec["egress"] = egress
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def app_selector(app: str | dict[str, str]) -> dict[str, Any]:
    return pods(app)["podSelector"]


def default_deny(namespace: str) -> dict[str, Any]:
    """Every pod isolated both ways, with no rule: what the policy pack's namespace-default-deny looks for."""
    return policy(namespace, "default-deny", {}, [], [])


def deny_but_dns(namespace: str) -> list[dict[str, Any]]:
    """Default deny, then DNS for every pod."""
    return [default_deny(namespace), policy(namespace, "allow-dns", {}, egress=[{"to": [DNS_PEER], "ports": [
        {"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}])]


def baseline(namespace: str, vpc_cidr: pulumi.Input[str], api_clients: dict[str, Any] | None = None
             ) -> list[dict[str, Any]]:
    """Default deny, then DNS for every pod and the Kubernetes API for `api_clients` (default: every pod)."""
    return [
        *deny_but_dns(namespace),
        policy(namespace, "allow-kubernetes-api", api_clients or {}, egress=[{
            "to": [block(vpc_cidr), *(block(c) for c in SERVICE_CIDRS)], "ports": tcp(443)}]),
    ]


def chart_namespace(namespace: str, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """A chart's namespace: its pods talk among themselves (operator and its webhook or metrics server) and
    the control plane calls its webhooks. Job pods cannot take this ingress: their egress stops at it."""
    return [
        *baseline(namespace, vpc_cidr),
        policy(namespace, "allow-same-namespace", {}, ingress=[{"from": [{"podSelector": {}}]}],
               egress=[{"to": [{"podSelector": {}}]}]),
        policy(namespace, "allow-control-plane", {},
               ingress=[{"from": [block(vpc_cidr)], "ports": tcp(*CONTROL_PLANE_PORTS[namespace])}]),
    ]


def internet(vpc_cidr: pulumi.Input[str], *ports: int) -> Rule:
    """Anywhere outside the VPC, the Service ranges and link-local (S3, the Hugging Face hub, package mirrors,
    AWS's public endpoints), on `ports` (default: all)."""
    rule: Rule = {"to": [block("0.0.0.0/0", vpc_cidr, *SERVICE_CIDRS, LINK_LOCAL)]}
    if ports:
        rule["ports"] = tcp(*ports)
    return rule


def slurm_policies(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    ns = SLURM_NAMESPACE
    in_cluster_db = config.slurm.accounting.database == "in-cluster"
    clients = [pods("slurmd"), pods("login"), pods("slurmrestd"), pods("slurmdbd"), JOB_PODS,
               pods(PROMETHEUS_POD, KUBE_PROMETHEUS_STACK.namespace), pods(REPAIR_POD)]
    database: Peer = pods(MARIADB_POD) if in_cluster_db else block(vpc_cidr)
    found = [
        *baseline(ns, vpc_cidr, JOB_SHELLS_EXCLUDED),
        # slurmd registers, login/slurmrestd/the accounts Job ask, slurmdbd pushes accounting updates,
        # Prometheus scrapes Slurm's OpenMetrics on the same port (Slinky's ServiceMonitor, port slurmctld).
        # slurmctld calls srun back (time limits, node failures, step completion) wherever srun runs.
        policy(ns, "slurmctld", app_selector("slurmctld"),
               ingress=[{"from": clients, "ports": tcp(SLURMCTLD)}],
               egress=[{"to": [pods("slurmd")], "ports": [*tcp(SLURMD), SRUN_PORTS]},
                       {"to": [pods("slurmdbd")], "ports": tcp(SLURMDBD)},
                       {"to": [pods("login")], "ports": [SRUN_PORTS]}]),
        # Jobs: slurmctld and srun on login pods start steps; NCCL's sockets, PMIx and step fan-out run
        # between slurmd pods on any port; step I/O goes back to srun, on a login pod or (srun in a batch
        # script) a slurmd pod. Never slurmdbd, slurmrestd, the database.
        policy(ns, "slurmd", app_selector("slurmd"),
               ingress=[{"from": [pods("slurmctld")], "ports": [*tcp(SLURMD), SRUN_PORTS]},
                        {"from": [pods("login")], "ports": [ANY_PORT_ABOVE_1023]},
                        {"from": [pods("slurmd")]}],
               egress=[{"to": [pods("slurmctld")], "ports": tcp(SLURMCTLD)},
                       {"to": [pods("slurmd")]},
                       {"to": [pods("login")], "ports": [SRUN_PORTS]},
                       *to_mlflow(config),
                       internet(vpc_cidr)]),
        # SSH through the NLB: with externalTrafficPolicy Cluster kube-proxy hands the pod a node address, with
        # Local the client's (kubernetes.io/docs/tutorials/services/source-ip/): both are admitted.
        policy(ns, "login", app_selector("login"),
               ingress=[{"from": [block(c) for c in [*config.slurm.login.allowed_cidrs, vpc_cidr]],
                         "ports": tcp(SSH)},
                        {"from": [pods("slurmd"), pods("slurmctld")], "ports": [SRUN_PORTS]}],
               egress=[{"to": [pods("slurmctld")], "ports": tcp(SLURMCTLD)},
                       {"to": [pods("slurmdbd")], "ports": tcp(SLURMDBD)},  # sacct, sacctmgr
                       {"to": [pods("slurmd")], "ports": [ANY_PORT_ABOVE_1023]},
                       *to_mlflow(config),
                       internet(vpc_cidr)]),
        policy(ns, "slurmdbd", app_selector("slurmdbd"),
               ingress=[{"from": [pods("slurmctld"), pods("login"), pods("slurmrestd"), JOB_PODS, pods(REPAIR_POD)],
                         "ports": tcp(SLURMDBD)}],
               egress=[{"to": [pods("slurmctld")], "ports": tcp(SLURMCTLD)},
                       {"to": [database], "ports": tcp(MARIADB)},
                       # on RDS its init container fetches the region's RDS CA bundle (truststore.pki.rds...)
                       *([] if in_cluster_db else [internet(vpc_cidr, 443)])]),
        # The operator calls slurmrestd, and with addons.jupyterhub notebooks submit jobs with their users' JWTs
        # (no login pod, no job, no Prometheus needs it).
        policy(ns, "slurmrestd", app_selector("slurmrestd"),
               ingress=[{"from": [pods(SLURM_OPERATOR_POD, SLURM_OPERATOR.namespace),
                                  *([pods(NOTEBOOK_POD, JUPYTERHUB)] if config.addons.jupyterhub else [])],
                         "ports": tcp(SLURMRESTD)}],
               egress=[{"to": [pods("slurmctld")], "ports": tcp(SLURMCTLD)},
                       {"to": [pods("slurmdbd")], "ports": tcp(SLURMDBD)}]),
        # The lifecycle controller (components/lifecycle/node_repair.py): a Slurm client (sacct for finished check
        # jobs), its
        # Kubernetes API calls through the baseline's 443, Prometheus scraping its metrics, and with EFA
        # partitions or Capacity Blocks STS and EC2 at their public endpoints.
        policy(ns, "repair", app_selector(REPAIR_POD),
               ingress=[{"from": [pods(PROMETHEUS_POD, KUBE_PROMETHEUS_STACK.namespace)],
                         "ports": tcp(REPAIR_METRICS)}],
               egress=[{"to": [pods("slurmctld")], "ports": tcp(SLURMCTLD)},
                       {"to": [pods("slurmdbd")], "ports": tcp(SLURMDBD)},
                       *([internet(vpc_cidr, 443)] if ec2_actions(config) else [])]),
        policy(ns, "accounts-reconcile", JOB_PODS["podSelector"],
               egress=[{"to": [pods("slurmctld")], "ports": tcp(SLURMCTLD)},
                       {"to": [pods("slurmdbd")], "ports": tcp(SLURMDBD)}]),
    ]
    if not in_cluster_db:
        # components/slinky/accounting_db_user.py: the Job reads the master secret (Secrets Manager, STS through
        # IRSA) and the RDS CA bundle over HTTPS, then creates slurmdbd's user on RDS.
        found.append(policy(ns, "database-user", {"matchLabels": {JOB_NAME_LABEL: DB_USER_JOB}},
                            egress=[{"to": [block(vpc_cidr)], "ports": tcp(MARIADB)}, internet(vpc_cidr, 443)]))
    if in_cluster_db:  # the operator creates the database and user over SQL
        found.append(policy(ns, "mariadb", app_selector(MARIADB_POD), ingress=[{
            "from": [pods("slurmdbd"), namespace_peer(MARIADB_OPERATOR.namespace)], "ports": tcp(MARIADB)}]))
    return found


def cross_namespace(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """The calls that leave a chart's namespace."""
    monitoring, slinky, keda = KUBE_PROMETHEUS_STACK.namespace, SLURM_OPERATOR.namespace, KEDA.namespace
    found = [
        policy(slinky, "operator-to-slurmrestd", app_selector(SLURM_OPERATOR_POD),
               egress=[{"to": [pods("slurmrestd", SLURM_NAMESPACE)], "ports": tcp(SLURMRESTD)}]),
        policy(keda, "operator-to-prometheus", app_selector(KEDA_OPERATOR_POD),
               egress=[{"to": [pods(PROMETHEUS_POD, monitoring)], "ports": tcp(PROMETHEUS_PORT)}]),
        policy(monitoring, "prometheus", app_selector(PROMETHEUS_POD),
               ingress=[{"from": [pods(KEDA_OPERATOR_POD, keda)], "ports": tcp(PROMETHEUS_PORT)}],
               egress=[{"to": [block(vpc_cidr)], "ports": tcp(*NODE_SCRAPE_PORTS)},
                       {"to": [namespace_peer(KUBE_SYSTEM)], "ports": tcp(COREDNS_METRICS)},
                       {"to": [pods("slurmctld", SLURM_NAMESPACE)], "ports": tcp(SLURMCTLD)},
                       {"to": [pods(REPAIR_POD, SLURM_NAMESPACE)], "ports": tcp(REPAIR_METRICS)}]),
        # Grafana's CloudWatch data source (FSx throughput) calls CloudWatch and STS at their public endpoints.
        policy(monitoring, "grafana-to-aws-apis", app_selector(GRAFANA_POD), egress=[internet(vpc_cidr, 443)]),
    ]
    if config.slurm.accounting.database == "in-cluster":
        found.append(policy(MARIADB_OPERATOR.namespace, "operator-to-mariadb", {},
                            egress=[{"to": [pods(MARIADB_POD, SLURM_NAMESPACE)], "ports": tcp(MARIADB)}]))
    return found


def k8s_operator_policies(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """KubeRay's and the MPI Operator's controllers only call the API (no webhook: kuberay-operator 1.7.0's
    chart enables none, mpi-operator v0.8.0 has none); Volcano is a chart namespace (its admission webhook)."""
    found = []
    if config.addons.kuberay is not None:
        found += baseline(KUBERAY.namespace, vpc_cidr)
    if config.addons.mpi_operator is not None:
        found += baseline(MPI_OPERATOR_NAMESPACE, vpc_cidr, app_selector(MPI_OPERATOR_POD))
    if config.addons.batch_operators:
        found += ml_policies(vpc_cidr)
    return found


def ml_policies(vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """The `ml` namespace, where RayCluster, MPIJob and Volcano Job pods run: a job's pods reach each other on
    every port (NCCL sockets, mpirun's SSH and ORTE wire-up, Ray's GCS, object manager and workers, all on
    ports their frameworks pick), and the internet for data and models. No Kubernetes API (none of the rendered
    jobs uses it), nothing in the VPC: never Slurm's daemons, the database, webhooks or IMDS."""
    ns = ML_NAMESPACE
    return [*deny_but_dns(ns),
            policy(ns, "allow-same-namespace", {}, ingress=[{"from": [{"podSelector": {}}]}],
                   egress=[{"to": [{"podSelector": {}}]}]),
            policy(ns, "allow-internet", {}, egress=[internet(vpc_cidr)])]


def chart_namespaces(config: ClusterConfig) -> list[str]:
    names = [CERT_MANAGER.namespace, SLURM_OPERATOR.namespace, KEDA.namespace, KUBE_PROMETHEUS_STACK.namespace]
    if config.slurm.accounting.database == "in-cluster":
        names.append(MARIADB_OPERATOR.namespace)
    if config.addons.volcano is not None:
        names.append(VOLCANO.namespace)
    return names


# zero-to-jupyterhub 4.4.0: hub and proxy pods carry app.kubernetes.io/name jupyterhub and component hub/proxy
# (templates/_helpers.tpl jupyterhub.matchLabelsLegacyAndModern); KubeSpawner 7.0.0 labels notebooks with the
# chart's name and component singleuser-server (spawner.py component_label, _build_common_labels). Ports: hub 8081
# (templates/hub/deployment.yaml), proxy http 8000 and api 8001 (templates/proxy/deployment.yaml), notebook 8888
# (KubeSpawner `port`).
HUB_POD = {NAME_LABEL: "jupyterhub", "app.kubernetes.io/component": "hub"}
PROXY_POD = {NAME_LABEL: "jupyterhub", "app.kubernetes.io/component": "proxy"}
NOTEBOOK_POD = {NAME_LABEL: "jupyterhub", "app.kubernetes.io/component": "singleuser-server"}
HUB_PORT, PROXY_HTTP, PROXY_API, NOTEBOOK_PORT = 8081, 8000, 8001, 8888
PROXY_HTTPS = 8443  # the proxy's own TLS port (z2jh 4.4.0 templates/proxy/deployment.yaml, port `https`)
LDAP_PORTS = (389, 636)


def jupyterhub_policies(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """The hub (the only Kubernetes API client: it creates notebook pods), the proxy (people's one way in, from
    `exposure.allowedCidrs` or the VPC: an NLB hands pods node or client addresses) and the notebooks, which
    reach the hub's API, slurmrestd and the internet, never IMDS, other VPC services or the rest of Slurm."""
    hub = config.addons.jupyterhub
    if hub is None:
        return []
    ns = JUPYTERHUB
    sources = [*(hub.exposure.allowed_cidrs if hub.exposure.type == "internal" else []), vpc_cidr]
    # the identity provider: an OIDC provider's HTTPS endpoints, or the directory (in the VPC or beyond)
    auth = ([internet(vpc_cidr, *LDAP_PORTS), {"to": [block(vpc_cidr)], "ports": tcp(*LDAP_PORTS)}]
            if config.slurm.identity.ldap else [internet(vpc_cidr, 443)])
    # The port people's connections reach: the proxy's TLS port when it serves the certificate itself (tls.secret),
    # else its HTTP port (behind an NLB that ends TLS, or a port-forward).
    tls = hub.exposure.tls
    entry = PROXY_HTTPS if hub.exposure.type == "internal" and tls is not None and tls.secret else PROXY_HTTP
    return [
        *baseline(ns, vpc_cidr, app_selector(HUB_POD)),
        policy(ns, "proxy", app_selector(PROXY_POD),
               ingress=[{"from": [block(c) for c in sources], "ports": tcp(entry)},
                        {"from": [pods(HUB_POD)], "ports": tcp(PROXY_API)}],
               egress=[{"to": [pods(HUB_POD)], "ports": tcp(HUB_PORT)},
                       {"to": [pods(NOTEBOOK_POD)], "ports": tcp(NOTEBOOK_PORT)}]),
        policy(ns, "hub", app_selector(HUB_POD),
               ingress=[{"from": [pods(PROXY_POD), pods(NOTEBOOK_POD)], "ports": tcp(HUB_PORT)}],
               egress=[{"to": [pods(PROXY_POD)], "ports": tcp(PROXY_API)},
                       {"to": [pods(NOTEBOOK_POD)], "ports": tcp(NOTEBOOK_PORT)}, *auth]),
        policy(ns, "notebooks", app_selector(NOTEBOOK_POD),
               ingress=[{"from": [pods(PROXY_POD), pods(HUB_POD)], "ports": tcp(NOTEBOOK_PORT)}],
               egress=[{"to": [pods(HUB_POD)], "ports": tcp(HUB_PORT)},
                       {"to": [pods("slurmrestd", SLURM_NAMESPACE)], "ports": tcp(SLURMRESTD)},
                       *to_mlflow(config),
                       internet(vpc_cidr)]),
    ]


def to_mlflow(config: ClusterConfig) -> list[Rule]:
    """The egress rule of an MLflow client (slurmd, login, notebooks) with addons.mlflow: its server's port."""
    if config.addons.mlflow is None:
        return []
    return [{"to": [pods(MLFLOW_POD, MLFLOW_NAMESPACE)], "ports": tcp(MLFLOW_PORT)}]


def mlflow_policies(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """The tracking server (components/addons/mlflow.py) takes connections from Slurm's jobs (slurmd), login shells
    and, with JupyterHub, notebooks: nothing else, and no address outside the cluster (its Service is ClusterIP). It
    reaches S3 and STS (its IRSA role) at their public endpoints on 443 (S3 through the VPC's gateway endpoint,
    whose routes carry S3's public prefixes), the RDS CA bundle, and on RDS its database; never the Kubernetes API,
    IMDS or Slurm. On RDS the database-user Job reads the master secret and makes the database and user."""
    mlflow = config.addons.mlflow
    if mlflow is None:
        return []
    ns, rds = MLFLOW_NAMESPACE, mlflow.database == "rds"
    clients = [pods("slurmd", SLURM_NAMESPACE), pods("login", SLURM_NAMESPACE),
               *([pods(NOTEBOOK_POD, JUPYTERHUB)] if config.addons.jupyterhub else [])]
    database = [{"to": [block(vpc_cidr)], "ports": tcp(MARIADB)}] if rds else []
    found = [*deny_but_dns(ns),
             policy(ns, "server", app_selector(MLFLOW_POD), ingress=[{"from": clients, "ports": tcp(MLFLOW_PORT)}],
                    egress=[*database, internet(vpc_cidr, 443)])]
    if rds:
        found.append(policy(ns, "database-user", {"matchLabels": {JOB_NAME_LABEL: MLFLOW_DB_USER_JOB}},
                            egress=[*database, internet(vpc_cidr, 443)]))
    return found


# argoproj/argo-helm argo-cd 10.1.1 templates/_common.tpl argo-cd.selectorLabels: <nameOverride argocd>-<component>;
# the repo server clones Git and pulls charts (values.yaml repoServer.name repo-server).
ARGOCD_REPO_SERVER_POD = {NAME_LABEL: "argocd-repo-server"}
GIT_SSH, HTTPS = 22, 443


def argocd_policies(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """Gitops mode: Argo CD's components talk among themselves (server, controller, repo server, redis) and read
    the API; only the repo server leaves the cluster, to the Git host and the chart registries (HTTPS, and SSH
    for an ssh repoURL). No webhook: the control plane never calls in."""
    if config.gitops is None:
        return []
    ns = ARGOCD
    ports = (HTTPS, GIT_SSH) if config.gitops.uses_ssh else (HTTPS,)
    return [*baseline(ns, vpc_cidr),
            policy(ns, "allow-same-namespace", {}, ingress=[{"from": [{"podSelector": {}}]}],
                   egress=[{"to": [{"podSelector": {}}]}]),
            policy(ns, "repo-server-to-git", app_selector(ARGOCD_REPO_SERVER_POD),
                   egress=[internet(vpc_cidr, *ports)])]


def policy_documents(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> list[dict[str, Any]]:
    """Every NetworkPolicy (metadata + spec) of the cluster."""
    return [*slurm_policies(config, vpc_cidr), *jupyterhub_policies(config, vpc_cidr),
            *mlflow_policies(config, vpc_cidr), *argocd_policies(config, vpc_cidr),
            *(p for ns in chart_namespaces(config) for p in chart_namespace(ns, vpc_cidr)),
            *cross_namespace(config, vpc_cidr), *k8s_operator_policies(config, vpc_cidr)]
