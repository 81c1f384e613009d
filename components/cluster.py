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
from components.network import Network

CONTROL_PLANE_LOGS = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
SYSTEM_LABEL = "node.slurm-eks.io/role"
SYSTEM_NODE_SELECTOR = {SYSTEM_LABEL: "system"}
CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
)


def assume_role_policy(service: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


def irsa_assume_role_policy(provider_arn: str, issuer_url: str, namespace: str, service_account: str) -> str:
    """Trust for exactly one Kubernetes service account through the cluster's OIDC provider (IRSA)."""
    issuer = issuer_url.removeprefix("https://")
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": provider_arn}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                                       f"{issuer}:aud": "sts.amazonaws.com"}}}]})


def node_role(name: str, opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """An EC2 role with what every EKS node needs (kubelet, VPC CNI, ECR pulls, SSM for break-glass)."""
    role = aws.iam.Role(name, assume_role_policy=assume_role_policy("ec2.amazonaws.com"), opts=opts)
    for arn in NODE_POLICIES:
        aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[1]}", role=role.name, policy_arn=arn,
                                     opts=opts)
    return role


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
                        policy_arn=CLUSTER_ADMIN_POLICY,
                        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"))})
                for i, arn in enumerate(c.admin_role_arns)
            },
            create_oidc_provider=True,
            endpoint_private_access=True,
            endpoint_public_access=bool(c.network.api_public_cidrs),
            public_access_cidrs=c.network.api_public_cidrs or None,
            encryption_config_key_arn=secrets_key.arn,
            enabled_cluster_log_types=CONTROL_PLANE_LOGS,
            # Without a default node group pulumi-eks only creates CoreDNS when asked to.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(
                enabled=True, configuration_values={"nodeSelector": SYSTEM_NODE_SELECTOR}),
            tags=c.tags,
            opts=child,
        )
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
        eks.ManagedNodeGroup(
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
        self.kubeconfig = cluster.kubeconfig_json
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_provider_url = cluster.oidc_provider_url
        self.cluster_security_group_id = cluster.cluster_security_group_id
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"clusterName": self.name, "kubeconfig": pulumi.Output.secret(self.kubeconfig),
                               "oidcProviderArn": self.oidc_provider_arn})

    def irsa_role(self, name: str, namespace: str, service_account: str, opts: pulumi.ResourceOptions) -> aws.iam.Role:
        """An IAM role that only `namespace/service_account` pods of this cluster can assume."""
        trust = pulumi.Output.all(self.oidc_provider_arn, self.oidc_provider_url).apply(
            lambda a: irsa_assume_role_policy(a[0], a[1], namespace, service_account))
        return aws.iam.Role(name, assume_role_policy=trust, opts=opts)
