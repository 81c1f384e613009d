"""`SlurmCluster`: the Slurm cluster as Slinky objects in the `slurm` namespace.

Controller (slurmctld) with persistent save-state, Accounting (slurmdbd) on a real MariaDB, RestApi
(slurmrestd), a LoginSet behind an NLB, and one NodeSet (slurmd) per partition. The Slurm key and JWT key
are random, generated once, and live only in Kubernetes Secrets (secret in Pulumi's state too). Who may log in
and whose jobs run: `slurm.identity`, through components/slinky/identity.py.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.aws.eks import EksCluster
from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.config.teams import Identity
from components.kubernetes.namespaces import Namespaces
from components.names import SLURM_NAMESPACE
from components.slinky import identity, node_health, slurm_conf, specs
from components.slinky.accounting_db import AccountingDatabase, AccountingDatabaseArgs
from components.slinky.accounts import accounts_reconcile
from components.slinky.agent_image import AgentImage
from components.slinky.host_access import host_access_policy
from components.slinky.job_aws import job_identity
from components.slinky.lifecycle_settings import (
    INITIAL_TOPOLOGY,
    TOPOLOGY_CONFIG_MAP,
    TOPOLOGY_FILE,
    places_topology,
)
from components.slinky.state_storage import StateStorage

PARTITIONS_CONFIG_MAP = "slurm-eks-partitions"


def secret_key(data: dict[str, str] | None, secret: str, key: str) -> str:
    """One key of a Secret as read from the API server, whose `data` values are base64."""
    if not data or key not in data:
        raise ValueError(f"Secret {SLURM_NAMESPACE}/{secret} has no key {key!r}")
    return base64.b64decode(data[key]).decode()


@dataclass(frozen=True)
class SlurmClusterArgs:
    config: ClusterConfig
    cluster_name: str
    provider: k8s.Provider
    operator: pulumi.Resource  # Slinky's webhooks must be serving before its objects are created
    storage: StateStorage
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    cluster_security_group_id: pulumi.Input[str]
    depends_on: list[pulumi.Resource]  # e.g. the Prometheus CRDs the Controller's ServiceMonitor needs
    cluster: EksCluster  # the OIDC provider of IRSA roles (the RDS database-user Job's)
    namespaces: Namespaces  # creates the slurm namespace with its NetworkPolicies
    agent_image: AgentImage  # what the accounts reconcile runs (components/slinky/agent_image.py)


class SlurmCluster(pulumi.ComponentResource):
    """`namespace` is the `slurm` Namespace and its NetworkPolicies (the shared FSx claim goes there too);
    `nodesets` maps each partition to its NodeSet, the target its autoscaler scales."""

    namespace: list[pulumi.Resource]
    nodesets: dict[str, k8s.apiextensions.CustomResource]
    controller: k8s.apiextensions.CustomResource  # slurmctld: what Slurm clients (the repair controller) wait for
    accounting_db: AccountingDatabase  # slurmdbd's MariaDB; its RDS instance also holds addons.mlflow's database

    def __init__(self, name: str, args: SlurmClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:SlurmCluster", name, None, opts)
        c = args.config
        self._provider = args.provider
        self.namespace = args.namespaces.create(f"{name}-namespace", SLURM_NAMESPACE, self)
        # Enforce is `privileged` there for slurmd: host access is admitted for the operator's slurmd pods only,
        # and the policy is in place before anything in the namespace.
        base: list[pulumi.Resource] = [*self.namespace, *host_access_policy(
            f"{name}-host-access", args.provider, self, self.namespace[0])]
        auth = [self._random_secret(f"{name}-slurm-key", specs.SLURM_KEY, 1024, base),
                self._random_secret(f"{name}-jwt-key", specs.JWT_KEY, 128, base)]
        people = c.slurm.identity
        sssd = self._object(f"{name}-sssd", k8s.core.v1.Secret, specs.SSSD.name, base,
                            string_data=self._sssd_files(name, people))
        # Declared people: the pods' init containers add them (identity.pod_identity); a directory needs none.
        people_files = [self._object(f"{name}-identity", k8s.core.v1.ConfigMap, specs.IDENTITY_CONFIG_MAP, base,
                                     data=identity.account_files(people))] if people.mode == "users" else []
        instances = {pname: partition_instance(p) for pname, p in c.partitions.items()}
        files = slurm_conf.config_files(instances)
        config_maps = [self._object(f"{name}-{cm}", k8s.core.v1.ConfigMap, cm, base, data=data)
                       for cm, data in (files | node_health.config_maps(c)).items()]
        if places_topology(c):  # its data is the lifecycle controller's (slurm/agent/topology/sync.py) once it runs
            config_maps.append(self._object(f"{name}-topology", k8s.core.v1.ConfigMap, TOPOLOGY_CONFIG_MAP, base,
                                            data={TOPOLOGY_FILE: INITIAL_TOPOLOGY}, ignore_changes=["data"]))
        partitions = self._object(f"{name}-partitions", k8s.core.v1.ConfigMap, PARTITIONS_CONFIG_MAP, base,
                                  data={"partitions.json": json.dumps(specs.partitions_document(c), indent=2,
                                                                      sort_keys=True)})

        db = self.accounting_db = AccountingDatabase(f"{name}-db", AccountingDatabaseArgs(
            c.slurm.accounting, args.cluster_name, SLURM_NAMESPACE, args.provider, args.vpc_id,
            args.private_subnet_ids, args.cluster_security_group_id, args.storage.storage_class, base,
            args.cluster, args.namespaces),
            pulumi.ResourceOptions(parent=self))
        ready = [args.operator, *args.depends_on, *auth]
        accounting = self._slinky(f"{name}-accounting", "Accounting", specs.CONTROLLER,
                                  specs.accounting_spec(c, db.database), [*ready, *db.ready])
        controller = self.controller = self._slinky(
            f"{name}-controller", "Controller", specs.CONTROLLER,
            specs.controller_spec(c, args.cluster_name, args.storage.storage_class,
                                  [*files, *([TOPOLOGY_CONFIG_MAP] if places_topology(c) else [])]),
            [*ready, *config_maps, *people_files, accounting])
        members = [*ready, controller, sssd, *people_files]
        # sacctmgr made to match slurm.accounts/qos once slurmctld and slurmdbd are there (a Job, after each up)
        accounts_reconcile(name, self, args.provider, c, args.cluster_name, args.agent_image,
                           [controller, accounting, auth[0]])
        self._slinky(f"{name}-restapi", "RestApi", specs.CONTROLLER, specs.restapi_spec(c), members)
        self._slinky(f"{name}-login", "LoginSet", specs.CONTROLLER,
                     specs.loginset_spec(c, args.vpc_cidr, PARTITIONS_CONFIG_MAP), [*members, partitions])
        # Jobs' AWS identity (the checkpoint store's prefix only), mounted into every NodeSet's pods.
        store = c.storage.checkpoint_store
        job_aws = job_identity(name, self, args.cluster, args.provider, SLURM_NAMESPACE, store, c.region,
                               base) if store is not None else []  # fmt: skip
        # The autoscaler owns replicas once the NodeSet exists; a later `pulumi up` must not reset them.
        self.nodesets = {
            pname: self._slinky(f"{name}-nodeset-{pname}", "NodeSet", pname, specs.nodeset_spec(pname, c),
                                [*members, *job_aws], ignore_changes=["spec.replicas"])
            for pname in c.partitions}
        self.register_outputs({"namespace": SLURM_NAMESPACE, "nodesets": list(self.nodesets)})

    def _object(self, name: str, kind: Any, object_name: str, depends_on: list[pulumi.Resource],
                ignore_changes: list[str] | None = None, **fields: Any) -> Any:
        return kind(name, metadata={"name": object_name, "namespace": SLURM_NAMESPACE}, **fields,
                    opts=pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=depends_on,
                                                ignore_changes=ignore_changes))

    def _sssd_files(self, name: str, people: Identity) -> dict[str, pulumi.Input[str]]:
        """The `slurm-sssd` Secret. A directory's bind password and CA are read when `pulumi up` runs, so an
        offline plan shows sssd.conf as unknown."""
        ldap = people.ldap
        if ldap is None:
            return {identity.SSSD_CONF_KEY: identity.sssd_conf(people)}
        password = self._secret_value(f"{name}-ldap-bind-password", ldap.bind_password) if ldap.bind_password \
            else None
        files: dict[str, pulumi.Input[str]] = {identity.SSSD_CONF_KEY: pulumi.Output.secret(
            pulumi.Output.from_input(password).apply(lambda value: identity.sssd_conf(people, value)))}
        if ldap.ca_certificate:
            files[identity.LDAP_CA_KEY] = self._secret_value(f"{name}-ldap-ca", ldap.ca_certificate)
        return files

    def _secret_value(self, name: str, source: str) -> pulumi.Output[str]:
        """A `SecretSource` (components/config/teams.py): a key of a Secret in the slurm namespace, which must exist
        before the `pulumi up` that reads it, or the SecretString of a Secrets Manager secret."""
        if not source.startswith("k8s:"):
            return aws.secretsmanager.get_secret_version_output(
                secret_id=source, opts=pulumi.InvokeOutputOptions(parent=self)).secret_string
        secret, key = source.removeprefix("k8s:").split("/", 1)
        read = k8s.core.v1.Secret.get(name, f"{SLURM_NAMESPACE}/{secret}",
                                      opts=pulumi.ResourceOptions(parent=self, provider=self._provider))
        return pulumi.Output.secret(read.data.apply(lambda data: secret_key(data, secret, key)))

    def _random_secret(self, name: str, key: specs.SecretKey, length: int,
                       depends_on: list[pulumi.Resource]) -> k8s.core.v1.Secret:
        value = random.RandomPassword(name, length=length, special=False, opts=pulumi.ResourceOptions(parent=self))
        return self._object(name, k8s.core.v1.Secret, key.name, depends_on, string_data={key.key: value.result})

    def _slinky(self, name: str, kind: str, object_name: str, spec: dict[str, Any],
                depends_on: list[pulumi.Resource], ignore_changes: list[str] | None = None
                ) -> k8s.apiextensions.CustomResource:
        return k8s.apiextensions.CustomResource(
            name, api_version=specs.API_VERSION, kind=kind,
            metadata={"name": object_name, "namespace": SLURM_NAMESPACE}, spec=spec,
            opts=pulumi.ResourceOptions(parent=self, provider=self._provider, depends_on=depends_on,
                                        ignore_changes=ignore_changes))
