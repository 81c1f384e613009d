"""What `addons.kuberay`, `addons.mpiOperator` and `addons.volcano` install, pinned to the versions of the CRDs
in ../shared/crds, and the labels and ports of their pods (the NetworkPolicies and the deploy check read them).
Resource-free, so components/segmentation/network_policies.py can import it without a cycle."""

from __future__ import annotations

from components import upstream
from components.kubernetes import namespaces
from components.kubernetes.charts import Chart

# ray-project/kuberay v1.7.0 helm-chart/kuberay-operator/Chart.yaml version 1.7.0; the repository its
# README adds (`helm repo add kuberay https://ray-project.github.io/kuberay-helm/`).
KUBERAY = Chart("kuberay-operator", "1.7.0", namespaces.KUBERAY, "https://ray-project.github.io/kuberay-helm/")
# volcano-sh/volcano v1.15.1 installer/helm/chart/volcano/Chart.yaml version 1.15.1; README.md: `helm repo add
# volcano-sh https://volcano-sh.github.io/helm-charts`, installed into volcano-system.
VOLCANO = Chart("volcano", "1.15.1", namespaces.VOLCANO, "https://volcano-sh.github.io/helm-charts")
# kubeflow/mpi-operator ships no chart: its README applies deploy/v2beta1/mpi-operator.yaml of the release tag,
# pinned by URL and SHA-256 in components/upstream.py and read from its cache (`make upstream`), never carried here.
MPI_OPERATOR_MANIFEST = upstream.MPI_OPERATOR

# The controllers' pod labels: kuberay v1.7.0 helm-chart/kuberay-operator/templates/deployment.yaml
# (app.kubernetes.io/name: nameOverride kuberay-operator); mpi-operator v0.8.0 deploy/v2beta1/mpi-operator.yaml
# Deployment template labels; volcano v1.15.1 installer/helm/chart/volcano/templates/{admission,controllers,
# scheduler}.yaml (`app: volcano-<part>`).
KUBERAY_OPERATOR_POD = {"app.kubernetes.io/name": "kuberay-operator"}
MPI_OPERATOR_POD = {"app.kubernetes.io/name": "mpi-operator", "app": "mpi-operator"}
VOLCANO_ADMISSION_POD = {"app": "volcano-admission"}
VOLCANO_CONTROLLER_POD = {"app": "volcano-controller"}
VOLCANO_SCHEDULER_POD = {"app": "volcano-scheduler"}
# volcano v1.15.1 values.yaml basic.admission_port: the admission webhook the API server calls. KubeRay's
# chart runs no webhook by default and the MPI Operator has none.
VOLCANO_ADMISSION_PORT = 8443

# How the operators label the pods of a job, which the `ml` namespace's policies and the deploy check use:
# kuberay v1.7.0 ray-operator/controllers/ray/utils/constant.go RayClusterLabelKey, RayNodeTypeLabelKey;
# mpi-operator v0.8.0 pkg/apis/kubeflow/v2beta1/constants.go JobNameLabel, JobRoleLabel; volcano v1.15.1
# staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/labels.go JobNameKey, TaskSpecKey.
RAY_CLUSTER_LABEL, RAY_NODE_TYPE_LABEL = "ray.io/cluster", "ray.io/node-type"
MPI_JOB_NAME_LABEL, MPI_JOB_ROLE_LABEL = "training.kubeflow.org/job-name", "training.kubeflow.org/job-role"
VOLCANO_JOB_LABEL, VOLCANO_TASK_LABEL = "volcano.sh/job-name", "volcano.sh/task-spec"
