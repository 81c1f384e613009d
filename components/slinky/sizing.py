"""How big a partition's slurmd pod is, and what Slurm then schedules on it: one definition, used to size the
NodeSet (components/slinky/specs.py) and by the job renderer (jobs/render.py `--cpus-per-task`). No Pulumi:
the renderer runs on the login pod.

The operator hands the slurmd container's limits to Slinky's image as POD_CPUS and POD_MEMORY
(SlinkyProject/slurm-operator v1.2.1 internal/builder/workerbuilder/worker_app.go getResourceLimits: the CPU
limit through resource.Quantity.Value(), which rounds up to a whole CPU (k8s.io/apimachinery pkg/api/resource
quantity.go: "rounded up to the nearest integer away from 0"); memory in bytes / 1024 / 1024, MiB rounded
down). The image turns them into `CoreSpecCount` and `MemSpecLimit` against what `slurmd -C` finds on the host
(SlinkyProject/containers 05efda08 schedmd/slurm/25.11/ubuntu24.04/files/usr/local/bin/slurmd-entrypoint.sh,
calculateCoreSpecCount and calculateMemSpecLimit), and Slurm never gives jobs the specialized cores.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from components import catalog
from components.catalog import InstanceType, Resources

if TYPE_CHECKING:  # annotations only: the job tooling and `slurm-eks --help` import this without the models
    from components.config.cluster import Partition

# What the DaemonSets on a partition node request (scheduler room the slurmd pod must leave), per the
# charts and add-ons this project installs there:
DAEMONSET_REQUESTS: dict[str, Resources] = {
    # aws/amazon-vpc-cni-k8s v1.23.0 charts/aws-vpc-cni/values.yaml: aws-node 25m, its node agent nothing.
    "aws-node": Resources(25, 0),
    # EKS's kube-proxy add-on: 100m.
    "kube-proxy": Resources(100, 0),
    # kubernetes-sigs/aws-ebs-csi-driver helm-chart-aws-ebs-csi-driver-2.64.0: node 10m/40Mi (values.yaml),
    # node-driver-registrar and liveness-probe 10m/32Mi (templates/_node.tpl); tolerateAllTaints: true.
    "ebs-csi-node": Resources(30, 104),
    # kubernetes-sigs/aws-fsx-csi-driver helm-chart-aws-fsx-csi-driver-1.17.0 values.yaml: node 10m/40Mi,
    # two sidecars 10m/32Mi each (components/storage/fsx.py tolerates every taint).
    "fsx-csi-node": Resources(30, 104),
    # aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.20 (de5fdc1d) values.yaml: 10m/20Mi.
    "aws-efa-k8s-device-plugin": Resources(10, 20),
}
# DaemonSets that request no memory still use some: nvidia-device-plugin 0.19.3 and the Neuron device plugin
# (resources: {}), prometheus-node-exporter 4.56.1 of kube-prometheus-stack 88.2.0 (resources: {}, tolerates
# every NoSchedule taint), aws-node and kube-proxy (CPU requests only). About 100 MiB each stays free for them.
UNREQUESTED_HEADROOM = Resources(0, 512)
# Slinky's logfile sidecar only copies slurmd's log FIFO to stdout (v1.2.1 internal/builder/common/scripts/
# logfile.sh), but it too needs requests == limits for the pod to be Guaranteed.
LOGFILE = Resources(100, 32)


def partition_threads_per_core(partition: Partition) -> int:
    """Hardware threads per core of the partition's types (EC2 DefaultThreadsPerCore; the most, should they
    differ, so a whole core of every type fits)."""
    return max(catalog.lookup(t).threads_per_core for t in partition.instance_types)


def slurmd_resources(partition: Partition) -> Resources:
    """The slurmd container's CPU and memory: what the smallest node of the partition leaves to pods
    (`catalog.allocatable`), less the DaemonSets, their headroom and the logfile sidecar. Whole cores, since
    Slinky's slurmd image turns the CPU limit into `CoreSpecCount` by whole cores; whole GiB."""
    nodes = [catalog.allocatable(catalog.lookup(t)) for t in partition.instance_types]
    smallest = Resources(min(n.cpu_millis for n in nodes), min(n.memory_mib for n in nodes))
    free = smallest - sum(DAEMONSET_REQUESTS.values(), UNREQUESTED_HEADROOM + LOGFILE)
    core = 1000 * partition_threads_per_core(partition)
    return Resources(free.cpu_millis // core * core, free.memory_mib // 1024 * 1024)


def pod_cpus(cpu_millis: int) -> int:
    """POD_CPUS for a CPU limit of `cpu_millis`: resource.Quantity.Value(), a whole CPU rounded up."""
    return math.ceil(cpu_millis / 1000)


def schedulable_cpus(instance: InstanceType, cpus: int) -> int:
    """CPUs Slurm hands out on `instance` when slurmd's image gets POD_CPUS=`cpus`: the entrypoint's
    `CoreSpecCount = cores - POD_CPUS / threadsPerCore` (bash integer division; none when that is not
    positive, none when POD_CPUS is 0), and Slurm schedules the other cores, every thread of each:
    (cores - CoreSpecCount) x threadsPerCore."""
    cores, threads = instance.cpu_cores, instance.threads_per_core
    core_spec = max(cores - cpus // threads, 0) if cpus > 0 else 0
    return (cores - core_spec) * threads


def slurm_cpus(partition: Partition) -> int:
    """CPUs Slurm schedules on one slurmd pod of the partition, on any of its types: what a job may ask per
    node (`--cpus-per-task` of one task per node). The pod's CPU limit through Slinky's CoreSpecCount."""
    cpus = pod_cpus(slurmd_resources(partition).cpu_millis)
    return min(schedulable_cpus(catalog.lookup(t), cpus) for t in partition.instance_types)
