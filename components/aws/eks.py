"""The EKS control plane, a small managed node group for controllers, and the Kubernetes provider.

Access is by EKS access entries only (`authentication_mode: API`, no aws-auth ConfigMap), and only the ones
this program declares: EKS's implicit cluster-creator admin is off, and the role `pulumi up` runs as gets its
own entry. The API endpoint is private; a public endpoint exists only when `network.apiPublicCidrs` lists who
may use it. The cluster and its Secrets key are `protect`ed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.aws.eks_addons import CLUSTER_TAG, CNI_NAMESPACE, CNI_SERVICE_ACCOUNT, addon_version, vpc_cni
from components.aws.iam import aws_scope, irsa_assume_role_policy, node_role, secrets_key_policy
from components.aws.vpc import Network
from components.config import cluster as cfg
from components.names import LOGIN_NODE_SELECTOR, LOGIN_TAINT, NODE_ROLE_LABEL

CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
SYSTEM_LABEL = NODE_ROLE_LABEL
SYSTEM_NODE_SELECTOR = {SYSTEM_LABEL: "system"}
# Kubernetes taint effects as the EKS API spells them (pulumi-aws eks.NodeGroupTaintArgs.effect).
TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
DEPLOYER_ENTRY = "deployer"
# An EKS access policy, in the deploying partition (docs.aws.amazon.com/eks/latest/userguide/access-policies.html).
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


@dataclass(frozen=True)
class EksClusterArgs:
    config: cfg.ClusterConfig
    cluster_name: str
    network: Network


def no_creator_admin(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """pulumi-eks v4 hard-codes `accessConfig.bootstrapClusterCreatorAdminPermissions: true` on the
    aws.eks.Cluster it creates (nodejs/eks/cluster/cluster.ts) and has no argument for it: this transform turns it
    off, so the only admins are the access entries declared here. It applies when the cluster is created
    (pulumi-eks ignores later changes to the field, and EKS cannot change it in place)."""
    if args.type_ != "aws:eks/cluster:Cluster":
        return None
    access = {**(args.props.get("accessConfig") or {}), "bootstrapClusterCreatorAdminPermissions": False}
    return pulumi.ResourceTransformResult(props={**args.props, "accessConfig": access}, opts=args.opts)


def deployer_arn() -> pulumi.Output[str]:
    """The IAM principal `pulumi up` runs as: the role behind an assumed-role session (aws.iam.getSessionContext
    passes any other ARN through)."""
    caller = aws.get_caller_identity_output()
    return aws.iam.get_session_context_output(arn=caller.arn).issuer_arn


def _not_listed_twice(deployer: str, admin_role_arns: list[str]) -> str:
    if deployer in admin_role_arns:
        i = admin_role_arns.index(deployer)
        raise pulumi.RunError(
            f"adminRoleArns[{i}]: {deployer} is the role `pulumi up` runs as, which gets its own access entry "
            f"('{DEPLOYER_ENTRY}'); EKS allows one entry per principal. Fix: remove it from adminRoleArns.")
    return deployer


class EksCluster(pulumi.ComponentResource):
    name: str
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_provider_url: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: EksClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:EksCluster", name, None, opts)
        c, child = args.config, pulumi.ResourceOptions(parent=self)
        self.name = args.cluster_name
        deployer = pulumi.Output.from_input(deployer_arn()).apply(
            lambda arn: _not_listed_twice(arn, c.admin_role_arns))
        # Its administrators (the admin roles and the deployer, which must keep kms:PutKeyPolicy or KMS refuses
        # the policy) cannot decrypt; EKS uses it through its grant.
        key_policy = pulumi.Output.all(aws_scope(c.region), aws.get_partition_output().dns_suffix, deployer).apply(
            lambda a: json.dumps(secrets_key_policy(a[0], a[1], [*c.admin_role_arns, a[2]])))
        secrets_key = aws.kms.Key(
            f"{name}-secrets", description=f"EKS secrets encryption for {self.name}", policy=key_policy,
            enable_key_rotation=True, deletion_window_in_days=30,
            opts=pulumi.ResourceOptions(parent=self, protect=True))
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{self.name}-eks-secrets", target_key_id=secrets_key.key_id,
                      opts=child)
        partition = aws.get_partition_output().partition
        cluster_admin = eks.AccessPolicyAssociationArgs(
            policy_arn=partition.apply(lambda p: f"arn:{p}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"),
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"))
        admins = {f"admin-{i}": arn for i, arn in enumerate(c.admin_role_arns)}
        cluster = eks.Cluster(
            name,
            name=self.name,
            version=c.kubernetes_version,
            vpc_id=args.network.vpc_id,
            private_subnet_ids=args.network.private_subnet_ids,
            public_subnet_ids=args.network.public_subnet_ids,
            node_associate_public_ip_address=False,
            skip_default_node_group=True,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries={
                key: eks.AccessEntryArgs(principal_arn=arn, access_policies={"cluster-admin": cluster_admin})
                for key, arn in {**admins, DEPLOYER_ENTRY: deployer}.items()
            },
            create_oidc_provider=True,
            endpoint_private_access=True,
            endpoint_public_access=bool(c.network.public_endpoint_cidrs),
            public_access_cidrs=c.network.public_endpoint_cidrs or None,
            # No pulumi-eks groups: its `clusterSecurityGroupId` is then the group EKS creates, which the
            # control plane and managed nodes carry, and which admits all traffic from itself (Karpenter's
            # nodes join it through the discovery tag; RDS and FSx admit it). pulumi/pulumi-eks
            # nodejs/eks/cluster/cluster.ts: `core.clusterSecurityGroup?.id ?? vpcConfig.clusterSecurityGroupId`.
            skip_default_security_groups=True,
            encryption_config_key_arn=secrets_key.arn,
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            # CoreDNS is created below, once the system nodes exist: as an add-on created with the cluster
            # it has no node to run on and `pulumi up` waits for it until it fails (pulumi/pulumi-eks#1819).
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(
                version=addon_version(c.kubernetes_version, "kube-proxy")),
            # The VPC CNI add-on is ours (below): its IRSA role needs the cluster's OIDC provider, which
            # pulumi-eks creates inside this component.
            use_default_vpc_cni=True,
            tags=c.tags,
            opts=pulumi.ResourceOptions(parent=self, protect=True, transforms=[no_creator_admin]),
        )
        self.cluster_security_group_id = cluster.cluster_security_group_id
        network_deployer = c.network.deployer
        for i, cidr in enumerate(network_deployer.cidrs if network_deployer and network_deployer.via == "vpc" else []):
            # The EKS group admits only itself; an in-VPC deployer reaches the private endpoint on 443.
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-deployer-{i}", security_group_id=self.cluster_security_group_id, ip_protocol="tcp",
                from_port=443, to_port=443, cidr_ipv4=cidr, description="pulumi up: the Kubernetes API",
                opts=child)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_provider_url = cluster.oidc_provider_url
        cni_role = self.irsa_role(f"{name}-vpc-cni", CNI_NAMESPACE, CNI_SERVICE_ACCOUNT, child)
        # Nodes become Ready only once the CNI runs on them: every node group waits for it.
        cni = vpc_cni(f"{name}-vpc-cni", self.name, c.kubernetes_version, cni_role, args.network.vpc_id,
                      pulumi.ResourceOptions(parent=self, depends_on=[cluster]))
        node_groups = _NodeGroups(name, self.name, cluster, args.network, c, [cni], self)
        # Labelled, not tainted: GPU and Trainium nodes carry taints, so ordinary pods land here anyway.
        system_nodes = node_groups.create("system", c.system_nodes, SYSTEM_NODE_SELECTOR, taint=None)
        node_groups.create("login", c.login_nodes, LOGIN_NODE_SELECTOR, taint=LOGIN_TAINT)
        coredns = aws.eks.Addon(
            f"{name}-coredns", cluster_name=self.name, addon_name="coredns",
            addon_version=addon_version(c.kubernetes_version, "coredns"),
            configuration_values=json.dumps({"nodeSelector": SYSTEM_NODE_SELECTOR}),
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=c.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster, system_nodes]))
        self.cluster = cluster
        self.kubeconfig = cluster.kubeconfig_json
        # Every Kubernetes object goes through this provider, so each one waits for nodes and DNS: Helm
        # releases that wait for their pods would otherwise time out on a cluster with no node yet.
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[system_nodes, coredns]))
        self.register_outputs({"clusterName": self.name, "kubeconfig": pulumi.Output.secret(self.kubeconfig),
                               "oidcProviderArn": self.oidc_provider_arn})

    def irsa_role(self, name: str, namespace: str, service_account: str, opts: pulumi.ResourceOptions) -> aws.iam.Role:
        """An IAM role that only `namespace/service_account` pods of this cluster can assume."""
        trust = pulumi.Output.all(self.oidc_provider_arn, self.oidc_provider_url).apply(
            lambda a: irsa_assume_role_policy(a[0], a[1], namespace, service_account))
        return aws.iam.Role(name, assume_role_policy=trust, opts=opts)


class _NodeGroups:
    """Managed node groups of one cluster, each with its own node role (only the two node policies) and an
    IMDSv2-only, one-hop launch template, all on the pinned AL2023 release."""

    def __init__(self, name: str, cluster_name: str, cluster: eks.Cluster, network: Network,
                 config: cfg.ClusterConfig, depends_on: list[pulumi.Resource], parent: pulumi.Resource) -> None:
        self.name, self.cluster_name, self.cluster, self.network = name, cluster_name, cluster, network
        self.config, self.depends_on, self.parent = config, depends_on, parent

    def create(self, role: str, size: cfg.SystemNodes | cfg.LoginNodes, labels: dict[str, str],
               taint: dict[str, str] | None) -> eks.ManagedNodeGroup:
        c, child = self.config, pulumi.ResourceOptions(parent=self.parent)
        # EKS creates the access entry of a managed node group's role itself.
        node_role_ = node_role(f"{self.name}-{role}-node", child)
        launch_template = aws.ec2.LaunchTemplate(
            f"{self.name}-{role}",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=80, volume_type="gp3", encrypted="true", delete_on_termination="true"))],
            # The cluster tag Karpenter's nodes carry too: the VPC CNI may attach interfaces only to instances with it
            # (components/aws/eks_addons.py cni_policy).
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(
                resource_type="instance", tags={"Name": f"{self.cluster_name}-{role}", **c.tags,
                                                CLUSTER_TAG.format(self.cluster_name): "owned"})],
            opts=child)
        taints = [aws.eks.NodeGroupTaintArgs(key=taint["key"], value=taint["value"],
                                             effect=TAINT_EFFECTS[taint["effect"]])] if taint else None
        return eks.ManagedNodeGroup(
            f"{self.name}-{role}",
            cluster=self.cluster,
            node_role=node_role_,
            subnet_ids=self.network.private_subnet_ids,
            instance_types=size.instance_types,
            operating_system=eks.OperatingSystem.AL2023,
            # A new AMI reaches these nodes only when this pin changes (a rolling managed node group update).
            release_version=c.node_image.release,
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=launch_template.id, version=launch_template.latest_version.apply(str)),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=size.min_size, desired_size=size.min_size, max_size=size.max_size),
            labels=labels,
            taints=taints,
            tags=c.tags,
            opts=pulumi.ResourceOptions(parent=self.parent, depends_on=self.depends_on),
        )
