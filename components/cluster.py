"""The EKS control plane, a small managed node group for controllers, and the Kubernetes provider.

Access is by EKS access entries only (`authentication_mode: API`, no aws-auth ConfigMap). The API
endpoint is private; a public endpoint exists only when `network.apiPublicCidrs` lists who may use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components import config as cfg
from components.iam import irsa_assume_role_policy, node_role
from components.network import Network

CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
SYSTEM_LABEL = "node.slurm-eks.io/role"
SYSTEM_NODE_SELECTOR = {SYSTEM_LABEL: "system"}
# An EKS access policy, in the deploying partition (docs.aws.amazon.com/eks/latest/userguide/access-policies.html).
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


@dataclass(frozen=True)
class EksClusterArgs:
    config: cfg.ClusterConfig
    cluster_name: str
    network: Network


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
        secrets_key = aws.kms.Key(
            f"{name}-secrets", description=f"EKS secrets encryption for {self.name}",
            enable_key_rotation=True, deletion_window_in_days=30, opts=child)
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{self.name}-eks-secrets", target_key_id=secrets_key.key_id,
                      opts=child)
        # EKS creates the access entry of a managed node group's role itself.
        system_role = node_role(f"{name}-system-node", child)
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
                f"admin-{i}": eks.AccessEntryArgs(
                    principal_arn=arn,
                    access_policies={"cluster-admin": eks.AccessPolicyAssociationArgs(
                        policy_arn=aws.get_partition_output().partition.apply(
                            lambda p: f"arn:{p}:eks::aws:cluster-access-policy/{CLUSTER_ADMIN_POLICY}"),
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"))})
                for i, arn in enumerate(c.admin_role_arns)
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
            tags=c.tags,
            opts=child,
        )
        self.cluster_security_group_id = cluster.cluster_security_group_id
        deployer = c.network.deployer
        for i, cidr in enumerate(deployer.cidrs if deployer and deployer.via == "vpc" else []):
            # The EKS group admits only itself; an in-VPC deployer reaches the private endpoint on 443.
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-deployer-{i}", security_group_id=self.cluster_security_group_id, ip_protocol="tcp",
                from_port=443, to_port=443, cidr_ipv4=cidr, description="pulumi up: the Kubernetes API",
                opts=child)
        launch_template = aws.ec2.LaunchTemplate(
            f"{name}-system",
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1),
            block_device_mappings=[aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name="/dev/xvda",
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=80, volume_type="gp3", encrypted="true", delete_on_termination="true"))],
            tag_specifications=[aws.ec2.LaunchTemplateTagSpecificationArgs(
                resource_type="instance", tags={"Name": f"{self.name}-system", **c.tags})],
            opts=child)
        system_nodes = eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=cluster,
            node_role=system_role,
            subnet_ids=args.network.private_subnet_ids,
            instance_types=c.system_nodes.instance_types,
            operating_system=eks.OperatingSystem.AL2023,
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=launch_template.id, version=launch_template.latest_version.apply(str)),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=c.system_nodes.min_size, desired_size=c.system_nodes.min_size,
                max_size=c.system_nodes.max_size),
            # Labelled, not tainted: GPU and Trainium nodes carry taints, so ordinary pods land here anyway.
            labels=SYSTEM_NODE_SELECTOR,
            tags=c.tags,
            opts=child,
        )
        coredns = aws.eks.Addon(
            f"{name}-coredns", cluster_name=self.name, addon_name="coredns",
            configuration_values=json.dumps({"nodeSelector": SYSTEM_NODE_SELECTOR}),
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE", tags=c.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster, system_nodes]))
        self.cluster = cluster
        self.kubeconfig = cluster.kubeconfig_json
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_provider_url = cluster.oidc_provider_url
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
