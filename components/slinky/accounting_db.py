"""The MariaDB that slurmdbd writes job accounting to: Amazon RDS for MariaDB (`database: rds`) or one
MariaDB in the cluster run by mariadb-operator (`database: in-cluster`, for dev).

Accounting history is state: the RDS instance has deletion protection, takes a final snapshot, is
`protect`ed (a `pulumi destroy` stops at it) and `retain_on_delete` (removing it from the program leaves the
database in AWS). Deleting it is a deliberate two-step act: unprotect, then delete it in AWS.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.config.cluster import Accounting
from components.kubernetes.charts import MARIADB_OPERATOR, MARIADB_OPERATOR_CRDS, release
from components.kubernetes.namespaces import RESTRICTED_CONTAINER, RESTRICTED_POD, Namespaces
from components.slinky import accounting_db_user as db_user
from components.slinky.specs import DB_PASSWORD, Database, DatabaseTls, SecretKey

MARIADB_PORT = 3306
DATABASE = "slurm_acct_db"
USERNAME = "slurm"
RDS_ENGINE_VERSION = "11.4"  # MariaDB 11.4 LTS
RDS_PARAMETER_FAMILY = "mariadb11.4"
BACKUP_RETENTION_DAYS = 7
APPLY_IMMEDIATELY_ENV = "SLURM_EKS_APPLY_IMMEDIATELY"  # "1": set by `slurm-eks up --apply-immediately`
# slurmdbd warns below these and can time out on large purges/rollups (Slurm's accounting guide).
INNODB_SETTINGS = {"innodb_lock_wait_timeout": "900"}
# Every login to RDS over TLS: OFF by default up to MariaDB 11.4, no reboot needed (RDS User Guide,
# mariadb-ssl-connections.require-ssl.html).
RDS_SETTINGS = {**INNODB_SETTINGS, "require_secure_transport": "ON"}
IN_CLUSTER_NAME = "slurm-mariadb"
IN_CLUSTER_SIZE = "20Gi"
ROOT_PASSWORD = SecretKey("slurm-db-root-password", "password")


@dataclass(frozen=True)
class AccountingDatabaseArgs:
    config: Accounting
    cluster_name: str
    namespace: str
    provider: k8s.Provider
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    cluster_security_group_id: pulumi.Input[str]  # every node carries it: the only source allowed on 3306
    storage_class: pulumi.Input[str]
    depends_on: list[pulumi.Resource]
    cluster: EksCluster  # rds: whose OIDC provider the database-user Job's IRSA role trusts
    namespaces: Namespaces  # in-cluster: creates mariadb-operator's namespace


class AccountingDatabase(pulumi.ComponentResource):
    """`database` says where slurmdbd connects; the password is in the `DB_PASSWORD` Secret of `namespace`."""

    database: Database
    ready: list[pulumi.Resource]
    instance: aws.rds.Instance | None  # the RDS instance (database: rds), which addons.mlflow puts its database on

    def __init__(self, name: str, args: AccountingDatabaseArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:AccountingDatabase", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        # No characters that slurmdbd.conf or a MariaDB URL would read specially.
        password = random.RandomPassword(f"{name}-password", length=32, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        secret = k8s.core.v1.Secret(f"{name}-password",
                                    metadata={"name": DB_PASSWORD.name, "namespace": args.namespace},
                                    string_data={DB_PASSWORD.key: password.result}, opts=k8s_opts)
        tls: DatabaseTls | None = None
        self.instance = None
        if args.config.database == "rds":
            instance = self.instance = self._rds(name, args)
            host: pulumi.Input[str] = instance.address
            self.ready = [secret, *self._database_user(name, args, instance, secret)]
            tls = DatabaseTls(ca_bundle_url=aws.get_region_output().region.apply(db_user.rds_ca_bundle_url),
                              image=db_user.AWS_CLI_IMAGE)
        else:
            mariadb = self._in_cluster(name, args, secret)
            host = f"{IN_CLUSTER_NAME}.{args.namespace}.svc.cluster.local"
            self.ready = [secret, mariadb]
        self.database = Database(host=host, port=MARIADB_PORT, database=DATABASE, username=USERNAME, tls=tls)
        self.register_outputs({"host": host})

    def _database_user(self, name: str, args: AccountingDatabaseArgs, instance: aws.rds.Instance,
                       secret: k8s.core.v1.Secret) -> list[pulumi.Resource]:
        """The Job that makes `slurm` on RDS; slurmdbd waits for it (it is in `ready`)."""
        return [db_user.database_user_job(
            name, self, args.cluster, args.provider, args.namespace, instance, MARIADB_PORT,
            aws.get_region_output().region, USERNAME, DATABASE, DB_PASSWORD.name, DB_PASSWORD.key,
            [*args.depends_on, secret])]

    def _rds(self, name: str, args: AccountingDatabaseArgs) -> aws.rds.Instance:
        child = pulumi.ResourceOptions(parent=self)
        identifier = f"{args.cluster_name}-slurmdbd"
        subnets = aws.rds.SubnetGroup(f"{name}-subnets", name=identifier, subnet_ids=args.private_subnet_ids,
                                      description=f"Private subnets of {args.cluster_name}", opts=child)
        group = aws.ec2.SecurityGroup(f"{name}-sg", name=identifier, vpc_id=args.vpc_id,
                                      description=f"slurmdbd's MariaDB: 3306 from the nodes of {args.cluster_name}",
                                      opts=child)
        aws.vpc.SecurityGroupIngressRule(f"{name}-from-nodes", security_group_id=group.id, ip_protocol="tcp",
                                         from_port=MARIADB_PORT, to_port=MARIADB_PORT,
                                         referenced_security_group_id=args.cluster_security_group_id,
                                         description="MariaDB from the EKS cluster security group", opts=child)
        parameters = aws.rds.ParameterGroup(
            f"{name}-params", name=identifier, family=RDS_PARAMETER_FAMILY, opts=child,
            parameters=[aws.rds.ParameterGroupParameterArgs(name=k, value=v) for k, v in RDS_SETTINGS.items()])
        return aws.rds.Instance(
            f"{name}-mariadb",
            identifier=identifier,
            engine="mariadb",
            engine_version=RDS_ENGINE_VERSION,
            instance_class=args.config.instance_class,
            allocated_storage=args.config.storage_gib,
            max_allocated_storage=args.config.storage_gib * 4,
            storage_type="gp3",
            storage_encrypted=True,
            db_name=DATABASE,
            # RDS generates the master password and keeps it in Secrets Manager: it is never in Pulumi's state.
            # (RDS User Guide, rds-secrets-manager.html; such an instance cannot use blue/green deployments.)
            username=db_user.MASTER_USERNAME,
            manage_master_user_password=True,
            db_subnet_group_name=subnets.name,
            vpc_security_group_ids=[group.id],
            parameter_group_name=parameters.name,
            publicly_accessible=False,
            multi_az=args.config.multi_az,
            # A class, storage or Multi-AZ change waits for the weekly maintenance window unless `slurm-eks up
            # --apply-immediately` asks for it now (RDS User Guide, Overview.DBInstance.Modifying.html).
            apply_immediately=True if os.environ.get(APPLY_IMMEDIATELY_ENV) == "1" else None,
            backup_retention_period=BACKUP_RETENTION_DAYS,
            copy_tags_to_snapshot=True,
            auto_minor_version_upgrade=True,
            deletion_protection=True,
            skip_final_snapshot=False,
            final_snapshot_identifier=f"{identifier}-final",
            opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
        )

    def _in_cluster(self, name: str, args: AccountingDatabaseArgs,
                    password_secret: k8s.core.v1.Secret) -> k8s.apiextensions.CustomResource:
        on_system = {"nodeSelector": SYSTEM_NODE_SELECTOR}
        operator_ns = args.namespaces.create(f"namespace-{MARIADB_OPERATOR.namespace}", MARIADB_OPERATOR.namespace,
                                             self)
        crds = release("mariadb-operator-crds", MARIADB_OPERATOR_CRDS, {}, args.provider, self, operator_ns)
        # The chart leaves every security context empty (mariadb-operator 26.6.0 deploy/charts/mariadb-operator/
        # values.yaml podSecurityContext, securityContext, and under webhook and certController); its image runs
        # as 65532 (Dockerfile USER 65532:65532), so the restricted level's settings cost nothing.
        restricted = {"podSecurityContext": RESTRICTED_POD, "securityContext": RESTRICTED_CONTAINER}
        operator = release("mariadb-operator", MARIADB_OPERATOR, {
            "crds": {"enabled": False}, **on_system, **restricted,
            "webhook": {**on_system, **restricted}, "certController": {**on_system, **restricted},
        }, args.provider, self, operator_ns, depends_on=[crds])
        root = random.RandomPassword(f"{name}-root-password", length=32, special=False,
                                     opts=pulumi.ResourceOptions(parent=self))
        root_secret = k8s.core.v1.Secret(
            f"{name}-root-password", metadata={"name": ROOT_PASSWORD.name, "namespace": args.namespace},
            string_data={ROOT_PASSWORD.key: root.result},
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on))
        my_cnf = "[mariadb]\n" + "".join(f"{k}={v}\n" for k, v in INNODB_SETTINGS.items())
        return k8s.apiextensions.CustomResource(
            f"{name}-mariadb", api_version="k8s.mariadb.com/v1alpha1", kind="MariaDB",
            metadata={"name": IN_CLUSTER_NAME, "namespace": args.namespace},
            spec={
                "rootPasswordSecretKeyRef": ROOT_PASSWORD.ref,
                "database": DATABASE,
                "username": USERNAME,
                "passwordSecretKeyRef": DB_PASSWORD.ref,
                "port": MARIADB_PORT,
                "storage": {"size": IN_CLUSTER_SIZE, "storageClassName": args.storage_class},
                "myCnf": my_cnf,
                "nodeSelector": SYSTEM_NODE_SELECTOR,
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[operator, password_secret, root_secret]))
