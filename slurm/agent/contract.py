"""The contract between the Pulumi side (components/) and the agents (slurm/agent/): each value both sides need,
defined once. Standard library only: components/ imports it without the agents' clients.

Metrics: what the repair controller and the active checks export, by name, with their labels and help.
Dashboards and alert rules (components/observability/) may use only these and the exporters' documented
metrics; tests hold them to that."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # "counter" or "gauge"
    labels: tuple[str, ...]
    help: str


NODES_DRAINED = Metric("slurm_eks_nodes_drained", "gauge", ("partition", "check"),
                       "Nodes drained now by a slurm-eks check, by the check that drained them.")
NODES_DRAINED_BY_PERSON = Metric("slurm_eks_nodes_drained_by_person", "gauge", ("partition",),
                                 "Nodes drained now with a reason a person wrote (never repaired automatically).")
REPLACEMENTS = Metric("slurm_eks_repair_replacements_total", "counter", ("partition", "check"),
                      "Nodes the repair controller had Karpenter replace (NodeClaim deleted).")
REPAIRS_HELD = Metric("slurm_eks_repair_held_total", "counter", ("partition", "why"),
                      "Replacements the controller held back (rate limit, no NodeClaim found, jobs still running).")
REPAIR_ERRORS = Metric("slurm_eks_repair_errors_total", "counter", ("step",),
                       "Controller passes that failed (reading Slurm, reading or deleting Kubernetes objects).")
BUS_BANDWIDTH = Metric("slurm_eks_active_check_bus_bandwidth_gbps", "gauge", ("partition", "node", "check"),
                       "Bus bandwidth (GB/s) the last active check measured on the node (nccl or neuron).")
ACTIVE_CHECK_DRAINS = Metric("slurm_eks_active_check_drains_total", "counter", ("partition", "check"),
                             "Nodes drained because the active check measured them below the threshold.")
# What KEDA scales each partition's NodeSet on (components/lifecycle/autoscaling.py nodes_needed_query), from
# slurm/agent/health/demand.py: Slurm's own slurm_partition_jobs_pending counts held and limit-bound jobs too.
NODES_WANTED = Metric("slurm_eks_partition_nodes_wanted", "gauge", ("partition",),
                      "Nodes the partition's pending jobs would take if nodes existed, summed over the jobs that "
                      "could then start (held, dependent, later-starting, limit-bound and reserved jobs count 0).")
LAST_PASS = Metric("slurm_eks_repair_last_pass_timestamp_seconds", "gauge", (),
                   "When the controller last finished a pass (Unix time): a stale value means it is stuck.")

ALL: tuple[Metric, ...] = (NODES_DRAINED, NODES_DRAINED_BY_PERSON, REPLACEMENTS, REPAIRS_HELD, REPAIR_ERRORS,
                           BUS_BANDWIDTH, ACTIVE_CHECK_DRAINS, NODES_WANTED, LAST_PASS)


# --- The agents and how a pod runs one: `python3 -m slurm.agent <agent> [options]` (the image's ENTRYPOINT,
# slurm/agent/Dockerfile); components/ builds each container's args from these.
LIFECYCLE_AGENT = "lifecycle"  # repair, active checks, demand, topology and Capacity Blocks: one Deployment
ACCOUNTS_AGENT = "accounts"  # the accounts, users and QoS reconcile: a Job per changed document
AGENTS = (LIFECYCLE_AGENT, ACCOUNTS_AGENT)
CONF_SERVER_OPTION = "--conf-server"  # slurmctld's host:port: the agent starts sackd against it first
SETTINGS_OPTION = "--settings"  # the lifecycle agent's settings document (LifecycleSettings)
DESIRED_OPTION = "--desired"  # the accounts agent's desired document (AccountsDocument)
SETTINGS_FILE = "settings.json"
# The image's user (its Dockerfile's `USER`): Slinky's SlurmUser, uid and gid 401 in its images (SlinkyProject/
# containers schedmd/slurm/25.11/ubuntu24.04/Dockerfile SLURM_USER_UID), which slurmctld and slurmdbd treat as an
# administrator. The pods run as it, with it as fsGroup so the slurm.key (mode 0440) is readable to it alone.
AGENT_UID = 401
# Every agent pod carries this label: what makes a pod an agent's, whatever its name.
AGENT_POD_LABELS = {"app.kubernetes.io/part-of": "slurm-eks-agent"}
ACCOUNTS_FILE = "desired.json"

# --- Labels and annotations both sides name.
# slurmd pods, by the label Slinky gives them (slurm-operator v1.2.1 internal/builder/labels/labels.go WorkerApp
# as app.kubernetes.io/name): the topology step lists them, the NetworkPolicies select them.
SLURMD_POD_SELECTOR = "app.kubernetes.io/name=slurmd"
# A node's place in the network, which Slinky's operator copies into the Slurm node (slurm-operator v1.2.1
# api/v1beta1/well_known.go AnnotationNodeTopologyLine... `topology.slinky.slurm.net/spec`).
TOPOLOGY_ANNOTATION = "topology.slinky.slurm.net/spec"
# The pod template annotation that changes with the settings, so a new document is a new pod (a running agent
# keeps what it read at start).
CONFIG_DIGEST_ANNOTATION = "slurm-eks.io/config-sha256"

# --- What each lifecycle step calls in EC2 (botocore data/ec2/2016-11-15/service-2.json operation names): the
# agent's calls, the IAM actions its role gets (components/lifecycle/node_repair.py) and what the deploy check
# expects of that role (scripts/checks/iam_requests.py) are all these.
TOPOLOGY_EC2_CALL = "DescribeInstanceTopology"
CAPACITY_BLOCK_EC2_CALL = "DescribeCapacityReservations"


class DocumentError(ValueError):
    """A settings or accounts document that does not follow this contract; the message says where."""


def _get(document: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(document, Mapping) or key not in document:
        raise DocumentError(f"{where}: missing key {key!r}")
    return document[key]


@dataclass(frozen=True)
class ActiveCheckSettings:
    kind: str  # "nccl" (all_reduce_perf over the node's GPUs) or "neuron" (over its NeuronCores)
    ranks: int
    floor_gbps: float | None  # an absolute floor; None: only the relative floor over the partition's median

    def document(self) -> dict[str, Any]:
        return {"kind": self.kind, "ranks": self.ranks, "floorGBps": self.floor_gbps}

    @classmethod
    def parse(cls, document: Mapping[str, Any], where: str) -> ActiveCheckSettings:
        floor = document.get("floorGBps") if isinstance(document, Mapping) else None
        return cls(str(_get(document, "kind", where)), int(_get(document, "ranks", where)),
                   None if floor is None else float(floor))


@dataclass(frozen=True)
class TopologySettings:
    """Where the topology step finds slurmd pods and writes Slurm's topology.yaml."""

    name: str  # the topology's name in topology.yaml
    namespace: str
    pod_selector: str
    config_map: str
    key: str

    def document(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "podSelector": self.pod_selector,
                "configMap": self.config_map, "key": self.key}

    @classmethod
    def parse(cls, document: Mapping[str, Any], where: str) -> TopologySettings:
        return cls(*(str(_get(document, key, where)) for key in ("name", "namespace", "podSelector",
                                                                  "configMap", "key")))


@dataclass(frozen=True)
class LifecycleSettings:
    """The lifecycle agent's settings document (`settings.json`), written by components/lifecycle/node_repair.py
    and read by `python3 -m slurm.agent lifecycle`."""

    namespace: str
    ledger_config_map: str  # its replacement history, so the hourly bound survives a restart
    metrics_port: int
    pass_seconds: float
    repair_enabled: bool  # false: only log what it would replace
    repair_max_per_hour: int
    active_interval_seconds: float
    active_output_dir: str  # where the probes (Slurm jobs) write what they measured
    active_relative_floor: float
    active_max_nodes_per_round: int
    active_partitions: dict[str, ActiveCheckSettings]
    demand_seconds: float  # how often the pending jobs' nodes are counted for KEDA
    demand_max_nodes: dict[str, int]  # partition -> maxNodes: a job asking for more never starts, so counts 0
    region: str
    topology: TopologySettings | None  # None: no EFA partition, nothing to place
    capacity_blocks: dict[str, list[str]] = field(default_factory=dict)  # partition -> its Capacity Block ids

    def ec2_calls(self) -> list[str]:
        """The EC2 operations the steps these settings turn on call; empty: the agent needs no AWS role."""
        return [*([TOPOLOGY_EC2_CALL] if self.topology else []),
                *([CAPACITY_BLOCK_EC2_CALL] if self.capacity_blocks else [])]

    def document(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "ledgerConfigMap": self.ledger_config_map,
            "metricsPort": self.metrics_port,
            "passSeconds": self.pass_seconds,
            "repair": {"enabled": self.repair_enabled, "maxPerHour": self.repair_max_per_hour},
            "activeChecks": {"intervalSeconds": self.active_interval_seconds, "outputDir": self.active_output_dir,
                             "relativeFloor": self.active_relative_floor,
                             "maxNodesPerRound": self.active_max_nodes_per_round,
                             "partitions": {name: check.document()
                                            for name, check in sorted(self.active_partitions.items())}},
            "demand": {"seconds": self.demand_seconds, "maxNodes": dict(sorted(self.demand_max_nodes.items()))},
            "region": self.region,
            "topology": self.topology.document() if self.topology else None,
            "capacityBlocks": {name: list(ids) for name, ids in sorted(self.capacity_blocks.items())},
        }

    def json(self) -> str:
        return json.dumps(self.document(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def parse(cls, document: Mapping[str, Any]) -> LifecycleSettings:
        repair, active = _get(document, "repair", "settings"), _get(document, "activeChecks", "settings")
        demand = _get(document, "demand", "settings")
        topology = document.get("topology")
        return cls(
            namespace=str(_get(document, "namespace", "settings")),
            ledger_config_map=str(_get(document, "ledgerConfigMap", "settings")),
            metrics_port=int(_get(document, "metricsPort", "settings")),
            pass_seconds=float(_get(document, "passSeconds", "settings")),
            repair_enabled=bool(_get(repair, "enabled", "settings.repair")),
            repair_max_per_hour=int(_get(repair, "maxPerHour", "settings.repair")),
            active_interval_seconds=float(_get(active, "intervalSeconds", "settings.activeChecks")),
            active_output_dir=str(_get(active, "outputDir", "settings.activeChecks")),
            active_relative_floor=float(_get(active, "relativeFloor", "settings.activeChecks")),
            active_max_nodes_per_round=int(_get(active, "maxNodesPerRound", "settings.activeChecks")),
            active_partitions={name: ActiveCheckSettings.parse(check, f"settings.activeChecks.partitions.{name}")
                               for name, check in _get(active, "partitions", "settings.activeChecks").items()},
            demand_seconds=float(_get(demand, "seconds", "settings.demand")),
            demand_max_nodes={name: int(n) for name, n in _get(demand, "maxNodes", "settings.demand").items()},
            region=str(_get(document, "region", "settings")),
            topology=TopologySettings.parse(topology, "settings.topology") if topology else None,
            capacity_blocks={name: [str(i) for i in ids]
                             for name, ids in (document.get("capacityBlocks") or {}).items()},
        )


# --- The accounts document (format 1): the desired Slurm accounts, users and QoS, written by
# components/slinky/accounts_document.py, reconciled by `python3 -m slurm.agent accounts`. Each object keyed by
# name, each setting by sacctmgr's name; TRES as sacctmgr writes them (`gres/gpu=64,cpu=512`, mem in MiB), times
# as Slurm time strings, None for "no limit" (and, for Organization, "leave as it is").
ACCOUNTS_FORMAT = 1
ROOT_ACCOUNT = "root"  # made with the cluster (`sacctmgr add cluster`); every tree hangs below it


@dataclass(frozen=True)
class QosDocument:
    description: str | None = None
    priority: int = 0
    grp_tres: str = ""
    max_tres_per_user: str = ""
    max_tres_per_job: str = ""
    max_jobs_per_user: int | None = None
    max_submit_jobs_per_user: int | None = None
    max_wall: str | None = None

    def document(self) -> dict[str, Any]:
        return {"Description": self.description, "Priority": self.priority, "GrpTRES": self.grp_tres,
                "MaxTRESPerUser": self.max_tres_per_user, "MaxTRESPerJob": self.max_tres_per_job,
                "MaxJobsPerUser": self.max_jobs_per_user, "MaxSubmitJobsPerUser": self.max_submit_jobs_per_user,
                "MaxWall": self.max_wall}

    @classmethod
    def parse(cls, spec: Mapping[str, Any]) -> QosDocument:
        def count(key: str) -> int | None:
            return None if spec.get(key) is None else int(spec[key])
        return cls(spec.get("Description"), int(spec.get("Priority") or 0), spec.get("GrpTRES") or "",
                   spec.get("MaxTRESPerUser") or "", spec.get("MaxTRESPerJob") or "", count("MaxJobsPerUser"),
                   count("MaxSubmitJobsPerUser"), spec.get("MaxWall") or None)


@dataclass(frozen=True)
class AccountDocument:
    description: str | None = None
    organization: str | None = None
    parent: str = ROOT_ACCOUNT
    fairshare: int = 1
    qos: tuple[str, ...] = ()
    default_qos: str | None = None
    grp_tres: str = ""

    def document(self) -> dict[str, Any]:
        return {"Description": self.description, "Organization": self.organization, "Parent": self.parent,
                "Fairshare": self.fairshare, "QOS": sorted(self.qos), "DefaultQOS": self.default_qos,
                "GrpTRES": self.grp_tres}

    @classmethod
    def parse(cls, spec: Mapping[str, Any]) -> AccountDocument:
        return cls(spec.get("Description"), spec.get("Organization"), spec.get("Parent") or ROOT_ACCOUNT,
                   int(spec.get("Fairshare", 1)), tuple(spec.get("QOS") or ()), spec.get("DefaultQOS"),
                   spec.get("GrpTRES") or "")


@dataclass(frozen=True)
class UserDocument:
    accounts: tuple[str, ...]
    default_account: str | None = None  # None: the first of `accounts`

    def document(self) -> dict[str, Any]:
        return {"Accounts": sorted(self.accounts), "DefaultAccount": self.default_account}

    @classmethod
    def parse(cls, spec: Mapping[str, Any], where: str) -> UserDocument:
        return cls(tuple(_get(spec, "Accounts", where)), spec.get("DefaultAccount"))


@dataclass(frozen=True)
class AccountsDocument:
    cluster: str  # the Controller's clusterName, lower case as slurmdbd keeps it (slurm.conf(5))
    qos: dict[str, QosDocument] = field(default_factory=dict)
    accounts: dict[str, AccountDocument] = field(default_factory=dict)
    users: dict[str, UserDocument] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        return {"format": ACCOUNTS_FORMAT, "cluster": self.cluster,
                "qos": {name: q.document() for name, q in self.qos.items()},
                "accounts": {name: a.document() for name, a in self.accounts.items()},
                "users": {name: u.document() for name, u in self.users.items()}}

    def json(self) -> str:
        """Stable and made for review: keys sorted, one setting per line."""
        return json.dumps(self.document(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def parse(cls, document: Mapping[str, Any]) -> AccountsDocument:
        if not isinstance(document, Mapping) or document.get("format") != ACCOUNTS_FORMAT:
            found = document.get("format") if isinstance(document, Mapping) else document
            raise DocumentError(f"format {found!r}: this reconcile reads format {ACCOUNTS_FORMAT}")
        return cls(str(_get(document, "cluster", "document")),
                   {name: QosDocument.parse(spec) for name, spec in (document.get("qos") or {}).items()},
                   {name: AccountDocument.parse(spec) for name, spec in (document.get("accounts") or {}).items()},
                   {name: UserDocument.parse(spec, f"users.{name}")
                    for name, spec in (document.get("users") or {}).items()})
