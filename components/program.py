"""The whole cluster from one validated config: the Pulumi program `__main__.py` runs."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.addons.gitops import ArgoCd
from components.addons.jupyterhub import JupyterHubArgs, JupyterHubRelease
from components.addons.k8s_operators import K8sOperators, K8sOperatorsArgs
from components.addons.mlflow import MlflowArgs, MlflowServer
from components.aws.eks import EksCluster, EksClusterArgs
from components.aws.vpc import Network, NetworkArgs
from components.compute.device_plugins import DevicePlugins, DevicePluginsArgs
from components.compute.karpenter import Karpenter, KarpenterArgs
from components.compute.nodepools import PartitionNodes, PartitionNodesArgs, PoolNodes
from components.config.cluster import CONFIG_KEY, CONFIG_NAMESPACE, ClusterConfig
from components.config.deployed_record import OUTPUT as DEPLOYED_OUTPUT
from components.config.deployed_record import record as deployed_record
from components.config.k8s_pools import NodeGroup
from components.config.mlflow import artifact_buckets
from components.config.problems import ConfigError
from components.config.stack_context import StackContext
from components.config.validation import parse_cluster_config
from components.findings_render import render_block
from components.kubernetes.handover import hand_over_to
from components.lifecycle.autoscaling import Autoscaling, AutoscalingArgs
from components.lifecycle.node_repair import NodeRepair, NodeRepairArgs
from components.names import SLURM_NAMESPACE
from components.observability.cloudwatch import GrafanaCloudWatch
from components.observability.stack import Observability, ObservabilityArgs
from components.segmentation.segmented_namespaces import SegmentedNamespaces
from components.slinky.agent_image import agent_image
from components.slinky.cluster import SlurmCluster, SlurmClusterArgs
from components.slinky.operator import SlinkyOperator
from components.slinky.state_storage import StateStorage, StateStorageArgs
from components.storage.efs import ModelStorage, ModelStorageArgs, efs_subnets
from components.storage.fsx import SharedStorage, SharedStorageArgs, fsx_subnet, repository_buckets


def node_groups(config: ClusterConfig) -> dict[str, dict[str, dict[str, object]]]:
    """What each partition and Kubernetes pool may run: the cost estimate (scripts/cost) prices the plan from it."""
    def group(g: NodeGroup) -> dict[str, object]:
        return {"instanceTypes": list(g.instance_types), "minNodes": g.min_nodes, "maxNodes": g.max_nodes,
                "capacityType": g.capacity_type}
    return {"partitions": {n: group(p) for n, p in config.partitions.items()},
            "kubernetesPools": {n: group(p) for n, p in config.kubernetes_pools.items()}}


def load_config() -> ClusterConfig:
    """Read and validate `slurm-eks:cluster` before any resource exists; a bad config stops here."""
    raw = pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY)
    try:
        # Its siblings are unknown here (`pulumi` reads one stack file): the CLI's gates check them before.
        config, warnings = parse_cluster_config(raw, f"stack {pulumi.get_stack()}", StackContext(pulumi.get_stack()))
    except ConfigError as exc:
        raise pulumi.RunError(exc.render()) from None
    for warning in warnings:
        pulumi.log.warn(render_block(warning))
    return config


def build(config: ClusterConfig, stack: str) -> dict[str, pulumi.Input[object]]:
    """Create every component; return the stack outputs."""
    name = config.name_for(stack)
    tags = dict(sorted({"slurm-eks:cluster": name, "slurm-eks:stack": stack, **config.tags}.items()))
    aws_provider = aws.Provider("aws", region=config.region, default_tags=aws.ProviderDefaultTagsArgs(tags=tags))
    opts = pulumi.ResourceOptions(providers={"aws": aws_provider})
    # The S3 gateway endpoint admits the stack's own buckets: the FSx repositories', MLflow's artifacts, the
    # checkpoint store.
    store = config.storage.checkpoint_store  # jobs' checkpoints copied to S3 (and pruned there)
    store_prefix = store.s3.removeprefix("s3://") if store is not None else None
    network = Network("network", NetworkArgs(config.network, name, config.region, tuple(sorted({
        *repository_buckets(config.storage.fsx), *artifact_buckets(config.addons.mlflow),
        *([store_prefix.split("/")[0]] if store_prefix else [])})), (store_prefix,) if store_prefix else ()), opts)
    cluster = EksCluster("eks", EksClusterArgs(config, name, network), opts)
    vpc_cidr = config.network.vpc_cidr or aws.ec2.get_vpc_output(
        id=network.vpc_id, opts=pulumi.InvokeOutputOptions(provider=aws_provider)).cidr_block
    # Every namespace comes with its Pod Security labels and NetworkPolicies before anything runs in it.
    namespaces = SegmentedNamespaces(config, vpc_cidr, cluster.provider)
    # Gitops mode: Argo CD and its root Application first; every chart below is then Argo CD's (docs/gitops.md).
    argocd = ArgoCd("gitops", config.gitops, namespaces, opts) if config.gitops else None
    hand_over_to(argocd.root if argocd else None)
    karpenter = Karpenter("karpenter", KarpenterArgs(cluster, config.region), opts)
    for pname, partition in config.partitions.items():
        PartitionNodes(f"partition-{pname}", PartitionNodesArgs(
            pname, partition, config, name, karpenter.node_role.name, cluster.provider, [karpenter.crds]), opts)
    for pname, pool in config.kubernetes_pools.items():  # accelerator nodes Slurm never uses
        PoolNodes(f"pool-{pname}", PartitionNodesArgs(
            pname, pool, config, name, karpenter.node_role.name, cluster.provider, [karpenter.crds]), opts)
    DevicePlugins("device-plugins", DevicePluginsArgs(config.partitions, cluster.provider, config.kubernetes_pools),
                  opts)
    # Slurm: operator, then the cluster; KEDA + Prometheus scale each partition's NodeSet.
    operator = SlinkyOperator("slinky", namespaces, opts)
    state_storage = StateStorage("slurm-state", StateStorageArgs(cluster, name), opts)
    grafana_cloudwatch = GrafanaCloudWatch("grafana-cloudwatch", cluster, opts)  # FSx metrics in Grafana
    autoscaling = Autoscaling("autoscaling", AutoscalingArgs(config, namespaces, state_storage.ready,
                                                             grafana_cloudwatch.role_arn), opts)
    # The in-cluster agents' image (slurm/agent/Dockerfile), built into the stack's ECR by `pulumi up`.
    agents = agent_image("agent-image", config, name, opts)
    slurm = SlurmCluster("slurm", SlurmClusterArgs(
        config, name, cluster.provider, operator.ready, state_storage, network.vpc_id, vpc_cidr,
        network.private_subnet_ids, cluster.cluster_security_group_id, [autoscaling.metrics], cluster, namespaces,
        agents), opts)
    autoscaling.scale(slurm.nodesets)
    # The claim every login and compute pod mounts at /shared lives in the Slurm namespace.
    storage = SharedStorage("storage", SharedStorageArgs(
        config.storage.fsx, cluster, network.vpc_id, fsx_subnet(network, config.network), SLURM_NAMESPACE,
        slurm.namespace), opts)
    # Grafana's dashboards (the FSx one on this file system), the GPU and Trainium exporters
    # (components/observability/stack.py).
    Observability("observability", ObservabilityArgs(config, namespaces, autoscaling.metrics, autoscaling.monitoring,
                                                     storage.file_system_id), opts)
    # Nodes the checks drained are replaced; active checks measure idle ones (slurm/agent/health/); EFA nodes are placed
    # in Slurm's topology from EC2 and Capacity Blocks' ends reserved (slurm/agent/topology/, slurm/agent/capacity/).
    NodeRepair("repair", NodeRepairArgs(config, cluster.provider, [slurm.controller, autoscaling.metrics,
                                                                   storage], cluster, agents), opts)
    outputs: dict[str, pulumi.Input[object]] = {}
    models: ModelStorage | None = None
    if config.storage.efs is not None:  # the model claim login and compute pods mount read-only
        models = ModelStorage("models", ModelStorageArgs(
            config.storage.efs, cluster, network.vpc_id, efs_subnets(network, config.network), SLURM_NAMESPACE,
            slurm.namespace), opts)
        outputs["efsFileSystemId"] = models.file_system_id
    if config.addons.batch_operators:  # KubeRay, MPI Operator, Volcano; their jobs' `ml` namespace with the claims
        K8sOperators("k8s-operators", K8sOperatorsArgs(config, namespaces, storage, models), opts)
    if config.addons.jupyterhub is not None:  # notebooks on the pools, submitting to Slurm through slurmrestd
        JupyterHubRelease("jupyterhub", JupyterHubArgs(config, namespaces, cluster.provider, storage, models,
                                                       state_storage.storage_class), opts)
    if config.addons.mlflow is not None:  # runs, metrics and the model registry, at MLFLOW_TRACKING_URI
        outputs["mlflowTrackingUri"] = MlflowServer("mlflow", MlflowArgs(
            config, namespaces, cluster, slurm.accounting_db.instance, state_storage.storage_class), opts).tracking_uri
    return {
        "slurmNamespace": SLURM_NAMESPACE,
        "slurmPartitions": list(slurm.nodesets),
        "nodeGroups": node_groups(config),
        "clusterName": name,
        "region": config.region,
        "vpcId": network.vpc_id,
        "privateSubnetIds": network.private_subnet_ids,
        "oidcProviderArn": cluster.oidc_provider_arn,
        "fsxFileSystemId": storage.file_system_id,
        "kubeconfig": pulumi.Output.secret(cluster.kubeconfig),
        DEPLOYED_OUTPUT: deployed_record(config, stack),
        **outputs,
    }
