"""NVIDIA's dcgm-exporter on the GPU partitions' nodes, with Slurm job ids on its series.

HPC job mapping (NVIDIA/dcgm-exporter 4.5.3-4.8.2 README.md "How to include HPC jobs in metric labels";
pkg/cmd/app.go flag --hpc-job-mapping-dir, env DCGM_HPC_JOB_MAPPING_DIR; internal/pkg/transformation/hpc.go):
the exporter reads DCGM_JOB_MAP_DIR, where each file is named after a GPU index (or `<gpu>.<gpu instance>` for
MIG) and holds one job id per line, and labels that GPU's series `hpc_job="<id>"` (one series per id). A Slurm
prolog writes the files and the epilog removes them; slurmd pods mount the same hostPath.
"""

from __future__ import annotations

from typing import Any

from components.config.cluster import ClusterConfig
from components.kubernetes import namespaces
from components.kubernetes.charts import Chart
from components.observability.metric_catalog import DCGM_COUNTERS
from components.observability.nodes import accelerator_affinity, accelerator_tolerations
from components.slinky.health_settings import DCGM_JOB_MAP_DIR  # the prolog writes it (node-check.sh)

# NVIDIA/dcgm-exporter 4.5.3-4.8.2 deployment/Chart.yaml version 4.8.2 (image 4.5.3-4.8.2-distroless in
# deployment/values.yaml); README.md: `helm repo add gpu-helm-charts https://nvidia.github.io/dcgm-exporter/helm-charts`.
DCGM_EXPORTER = Chart("dcgm-exporter", "4.8.2", namespaces.MONITORING,
                      "https://nvidia.github.io/dcgm-exporter/helm-charts")
DCGM_RELEASE = "dcgm-exporter"
JOB_MAP_ENV = "DCGM_HPC_JOB_MAPPING_DIR"
_JOB_MAP_VOLUME = "slurm-job-map"
# deployment/values.yaml extraVolumeMounts default: Helm replaces lists, so ours repeats it (the counters file).
_COUNTERS_MOUNT = {"name": "exporter-metrics-volume", "mountPath": "/etc/dcgm-exporter/default-counters.csv",
                   "subPath": "default-counters.csv"}


def counters_csv() -> str:
    """The counters file (`FIELD, type, help` per line) the chart's ConfigMap takes from `customMetrics`
    (deployment/templates/metrics-configmap.yaml) and the default arguments load (`-f .../default-counters.csv`)."""
    return "".join(f"{c.field}, {c.kind}, {c.help}\n" for c in DCGM_COUNTERS)


def dcgm_values(config: ClusterConfig) -> dict[str, Any]:
    return {
        "affinity": accelerator_affinity("nvidia"),
        "tolerations": accelerator_tolerations(config, "nvidia"),  # replaces the chart's control-plane toleration
        "customMetrics": counters_csv(),
        "extraEnv": [{"name": JOB_MAP_ENV, "value": DCGM_JOB_MAP_DIR}],
        "extraHostVolumes": [{"name": _JOB_MAP_VOLUME, "hostPath": DCGM_JOB_MAP_DIR}],
        "extraVolumeMounts": [_COUNTERS_MOUNT,
                              {"name": _JOB_MAP_VOLUME, "mountPath": DCGM_JOB_MAP_DIR, "readOnly": True}],
        "serviceMonitor": {"enabled": True, "interval": "15s"},
    }
