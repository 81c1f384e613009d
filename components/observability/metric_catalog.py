"""Every metric name a dashboard (components/observability/dashboards) or alert rule (components/observability/rules.py)
may use, by exporter, each with where upstream defines it. tests/observability parse every PromQL expression and
hold it to these names, so a misspelt or vanished metric fails a test instead of drawing an empty panel.

Labels listed are the exporter's own; Prometheus adds the target's (job, instance, namespace, pod, service,
endpoint, container) to every series it scrapes through a ServiceMonitor.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exporter:
    name: str
    source: str  # repository, path and tag the names were read from
    labels: tuple[str, ...]  # the labels its series carry (besides the target's)
    names: frozenset[str]


@dataclass(frozen=True)
class DcgmCounter:
    field: str  # the DCGM field, which is also the Prometheus metric name
    kind: str  # gauge, counter, or label (a label on every metric, not a metric of its own)
    help: str


# --- dcgm-exporter -------------------------------------------------------------------------------------------
# NVIDIA/dcgm-exporter 4.5.3-4.8.2 (chart 4.8.2) etc/default-counters.csv, every uncommented row, in order; then
# the ECC counters that file ships commented out, which we switch on (node health: a double-bit error means the
# GPU must go). components/observability/dcgm.py writes exactly these rows into the chart's `customMetrics`.
DCGM_DEFAULT_COUNTERS: tuple[DcgmCounter, ...] = (
    DcgmCounter("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    DcgmCounter("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    DcgmCounter("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    DcgmCounter("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    DcgmCounter("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    DcgmCounter("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    DcgmCounter("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    DcgmCounter("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    DcgmCounter("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    DcgmCounter("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    DcgmCounter("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    DcgmCounter("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    DcgmCounter("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    DcgmCounter("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    DcgmCounter("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    DcgmCounter("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
                "Total number of NVLink bandwidth counters for all lanes."),
    DcgmCounter("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    DcgmCounter("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
                "Number of remapped rows for uncorrectable errors"),
    DcgmCounter("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    DcgmCounter("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    DcgmCounter("DCGM_FI_DRIVER_VERSION", "label", "Driver Version"),
    DcgmCounter("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    DcgmCounter("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    DcgmCounter("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
                "Ratio of cycles the device memory interface is active sending or receiving data."),
    DcgmCounter("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
                "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads"
                " - in bytes per second."),
    DcgmCounter("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
                "The rate of data received over the PCIe bus - including both protocol headers and data payloads"
                " - in bytes per second."),
)
DCGM_ADDED_COUNTERS: tuple[DcgmCounter, ...] = (  # commented out in the same file (# ECC)
    DcgmCounter("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    DcgmCounter("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    DcgmCounter("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors."),
    DcgmCounter("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors."),
)
DCGM_COUNTERS = DCGM_DEFAULT_COUNTERS + DCGM_ADDED_COUNTERS
# dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/const.go hpcJobAttribute: the label the HPC job mapping
# adds (one series per job id listed in the GPU's mapping file).
DCGM_JOB_LABEL = "hpc_job"
DCGM = Exporter(
    "dcgm-exporter",
    "NVIDIA/dcgm-exporter 4.5.3-4.8.2 etc/default-counters.csv (+ its commented ECC rows); labels: "
    "internal/pkg/rendermetrics/render_metrics.go, internal/pkg/transformation/const.go",
    ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION", DCGM_JOB_LABEL),
    frozenset(c.field for c in DCGM_COUNTERS if c.kind != "label"),
)


# --- Slurm 25.11 metrics/openmetrics -------------------------------------------------------------------------
# SchedMD/slurm slurm-25-11-6-1 src/plugins/metrics/openmetrics/openmetrics.c: ADD_METRIC(_KEYVAL) prefix "slurm_"
# to each name. By slurmctld endpoint (src/slurmctld/http.c), of which components/slinky/specs.py
# METRICS_ENDPOINTS scrapes all but /metrics/jobs-users-accts. There is no per-job metric (so no pending age) and
# no pending-reason breakdown: the nearest are *_jobs_hold and slurm_partition_jobs_wait_part_node_limit.
_NODE_STATES = ("alloc", "blocked", "completing", "cloud", "down", "drain", "drained", "draining", "dyn_future",
                "dyn_normal", "external", "fail", "future", "idle", "invalid_reg", "maint", "mixed", "noresp",
                "planned", "power_down", "power_up", "powered_down", "powering_up", "reboot_issued", "reboot_req",
                "resv", "unknown")
_JOB_STATES = ("bootfail", "cancelled", "completed", "completing", "configuring", "cpus_alloc", "deadline",
               "expediting", "failed", "fed_requeued", "finished", "hold", "memory_alloc", "node_failed",
               "nodes_alloc", "outofmemory", "pending", "powerup_node", "preempted", "requeued", "resizing", "revoked",
               "running", "signaling", "stageout", "started", "suspended", "timeout")
_PARTITION_NODE_STATES = ("alloc", "blocked", "cg", "cloud", "cpus_efctv", "cpus_idle", "cpus_alloc", "down", "drain",
                          "drained", "draining", "dyn_future", "dyn_normal", "external", "fail", "future", "idle",
                          "invalid_reg", "maint", "mem_alloc", "mem_avail", "mem_free", "mem_tot", "mixed", "no_resp",
                          "planned", "power_down", "power_up", "powered_down", "powering_down", "powering_up",
                          "reboot_issued", "reboot_requested", "resv", "unknown")
_PARTITION_JOB_EXTRA = ("max_job_nodes", "max_job_nodes_nohold", "min_job_nodes", "min_job_nodes_nohold",
                        "wait_part_node_limit")
_SCHEDULER = ("agent_cnt", "agent_queue_size", "agent_thread_cnt", "bf_depth_mean", "bf_mean_cycle",
              "bf_mean_table_sz", "bf_queue_len_mean", "bf_try_depth_mean", "backfilled_het_jobs", "backfilled_jobs",
              "bf_active", "bf_cycle_cnt", "bf_cycle_last", "bf_cycle_max", "bf_cycle_tot", "bf_depth_tot",
              "bf_depth_try_tot", "bf_last_depth", "bf_last_depth_try", "bf_queue_len", "bf_queue_len_tot",
              "bf_table_size", "bf_table_size_tot", "bf_when_last_cycle", "sdiag_jobs_canceled",
              "sdiag_jobs_completed", "sdiag_jobs_failed", "sdiag_jobs_pending", "sdiag_jobs_running",
              "sdiag_jobs_started", "sdiag_jobs_submitted", "sdiag_job_states_ts", "last_backfilled_jobs",
              "sdiag_latency", "schedule_cycle_cnt", "schedule_cycle_depth", "schedule_cycle_last",
              "schedule_cycle_max", "schedule_cycle_tot", "schedule_queue_len", "sched_exit_end",
              "sched_exit_max_depth", "sched_exit_max_job_start", "sched_exit_lic", "sched_exit_rpc_cnt",
              "sched_exit_timeout", "bf_exit_end", "bf_exit_max_job_start", "bf_exit_max_job_test",
              "bf_exit_state_changed", "bf_exit_table_limit", "bf_exit_timeout", "sched_mean_cycle",
              "sched_mean_depth_cycle", "server_thread_cnt", "slurmdbd_queue_size", "last_proc_req_start",
              "sched_stats_timestamp")
_SLURM_SOURCE = "SchedMD/slurm slurm-25-11-6-1 src/plugins/metrics/openmetrics/openmetrics.c"
SLURM_NODES = Exporter(  # metrics_p_parse_nodes_metrics: per node (label node), then cluster-wide counts by state
    "slurm /metrics/nodes", f"{_SLURM_SOURCE} metrics_p_parse_nodes_metrics", ("node",),
    frozenset([f"slurm_node_{n}" for n in ("cpus", "cpus_alloc", "cpus_effective", "cpus_idle", "memory_alloc_bytes",
                                            "memory_effective_bytes", "memory_free_bytes", "memory_bytes")]
              + ["slurm_nodes"] + [f"slurm_nodes_{s}" for s in _NODE_STATES]))
SLURM_JOBS = Exporter(  # metrics_p_parse_jobs_metrics: cluster-wide counts, no labels
    "slurm /metrics/jobs", f"{_SLURM_SOURCE} metrics_p_parse_jobs_metrics", (),
    frozenset(["slurm_jobs"] + [f"slurm_jobs_{s}" for s in _JOB_STATES]))
SLURM_PARTITIONS = Exporter(  # _part_stats_to_metric: label partition; metrics_p_parse_parts_metrics: the count
    "slurm /metrics/partitions", f"{_SLURM_SOURCE} _part_stats_to_metric, metrics_p_parse_parts_metrics",
    ("partition",),
    frozenset(["slurm_partitions", "slurm_partition_jobs", "slurm_partition_cpus", "slurm_partition_nodes"]
              + [f"slurm_partition_jobs_{s}" for s in (*_JOB_STATES, *_PARTITION_JOB_EXTRA)
                 if s not in ("nodes_alloc",)]
              + [f"slurm_partition_nodes_{s}" for s in _PARTITION_NODE_STATES]))
SLURM_SCHEDULER = Exporter(
    "slurm /metrics/scheduler", f"{_SLURM_SOURCE} metrics_p_parse_sched_metrics", (),
    frozenset(f"slurm_{n}" for n in _SCHEDULER))


# --- neuron-monitor ------------------------------------------------------------------------------------------
# neuron-monitor-prometheus.py, which the neuron-monitor image runs (aws-neuron/aws-neuron-sdk v2.32.0
# tools/neuron-sys-tools/neuron-monitor-user-guide.rst "neuron-monitor-prometheus.py"; installed to
# /opt/aws/neuron/bin, not published in a git repository). The names AWS's own dashboard queries are in
# aws-neuron-sdk v2.32.0 src/examples/neuron-monitor/neuron-monitor-grafana.json; hardware_ecc_events_total
# (labels event_type: mem_ecc_corrected|mem_ecc_uncorrected|sram_ecc_corrected|sram_ecc_uncorrected,
# neuron_device_index) and execution_errors_total (error_type) are the script's process_neuron_hw_counters and
# process_execution_stats.
NEURON = Exporter(
    "neuron-monitor",
    "aws-neuron/aws-neuron-sdk v2.32.0 src/examples/neuron-monitor/neuron-monitor-grafana.json and "
    "neuron-monitor-prometheus.py (aws-neuronx-tools)",
    ("instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id", "runtime_tag",
     "neuroncore", "memory_location", "usage_type", "status_type", "error_type", "percentile", "event_type",
     "neuron_device_index"),
    frozenset({"neuroncore_utilization_ratio", "neuron_runtime_memory_used_bytes", "neuron_runtime_vcpu_usage_ratio",
               "neuroncore_memory_usage_constants", "neuroncore_memory_usage_model_code",
               "neuroncore_memory_usage_model_shared_scratchpad", "neuroncore_memory_usage_runtime_memory",
               "neuroncore_memory_usage_tensors", "execution_errors_total", "execution_status_total",
               "execution_latency_seconds", "hardware_ecc_events_total", "system_vcpu_count",
               "system_vcpu_usage_ratio", "system_memory_total_bytes", "system_memory_used_bytes",
               "system_swap_total_bytes", "system_swap_used_bytes", "instance_info", "neuron_hardware_info"}),
)


# --- node-exporter infiniband collector (EFA devices are under /sys/class/infiniband) ---------------------------
# prometheus/node_exporter v1.12.1 (appVersion of prometheus-node-exporter 4.56.1, which kube-prometheus-stack
# 88.2.0 Chart.yaml bundles) collector/infiniband_linux.go: subsystem "infiniband", labels device and port,
# enabled by default (registerCollector defaultEnabled). The port counters EFA's driver fills; the
# MLNX_OFED-only hw counters are left out.
_IB = ("port_data_received_bytes_total", "port_data_transmitted_bytes_total", "port_packets_received_total",
       "port_packets_transmitted_total", "port_discards_received_total", "port_discards_transmitted_total",
       "port_errors_received_total", "port_transmit_wait_total", "link_downed_total", "link_error_recovery_total",
       "local_link_integrity_errors_total", "symbol_error_total", "unicast_packets_received_total",
       "unicast_packets_transmitted_total", "multicast_packets_received_total",
       "multicast_packets_transmitted_total", "excessive_buffer_overrun_errors_total", "vl15_dropped_total",
       "state_id", "physical_state_id")
INFINIBAND = Exporter(
    "node-exporter infiniband",
    "prometheus/node_exporter v1.12.1 collector/infiniband_linux.go; prometheus-community/helm-charts "
    "kube-prometheus-stack-88.2.0 charts/kube-prometheus-stack/Chart.yaml (prometheus-node-exporter 4.56.1, "
    "appVersion 1.12.1)",
    ("device", "port"),
    frozenset(f"node_infiniband_{n}" for n in _IB),
)


# --- ours ----------------------------------------------------------------------------------------------------
# slurm/agent/contract.py ALL, restated: components/ imports of slurm/ only what it ships (the `components`
# import-linter contract); tests/observability/test_catalog.py fails when the two differ, so a name here is the
# exporter's.
# The nodes each partition's pending jobs want, counting only jobs that could start (slurm/agent/health/demand.py):
# what KEDA scales on (components/lifecycle/autoscaling.py nodes_needed_query).
PARTITION_NODES_WANTED = "slurm_eks_partition_nodes_wanted"
SLURM_EKS = Exporter(
    "slurm-eks repair controller and active checks", "slurm/agent/contract.py ALL",
    ("check", "node", "partition", "step", "why"),
    frozenset({"slurm_eks_nodes_drained", "slurm_eks_nodes_drained_by_person", "slurm_eks_repair_replacements_total",
               "slurm_eks_repair_held_total", "slurm_eks_repair_errors_total",
               "slurm_eks_active_check_bus_bandwidth_gbps", "slurm_eks_active_check_drains_total",
               PARTITION_NODES_WANTED, "slurm_eks_repair_last_pass_timestamp_seconds"}),
)

# kube-state-metrics is not used: nothing here needs Kubernetes object state beyond what Slurm reports.
EXPORTERS: tuple[Exporter, ...] = (DCGM, SLURM_NODES, SLURM_JOBS, SLURM_PARTITIONS, SLURM_SCHEDULER, NEURON,
                                   INFINIBAND, SLURM_EKS)
ALL_NAMES: frozenset[str] = frozenset().union(*(e.names for e in EXPORTERS))


# --- CloudWatch (Grafana's CloudWatch data source, components/observability/cloudwatch.py) --------------------
@dataclass(frozen=True)
class CloudWatchMetrics:
    namespace: str
    source: str  # the AWS page the names were read from
    dimensions: tuple[str, ...]  # the dimensions each metric takes
    names: frozenset[str]


# docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html: namespace AWS/FSx; the network I/O metrics take one
# dimension, FileSystemId, and their throughput or rate is the Sum statistic divided by the period in seconds
# (also how_to_use_metrics.html: "SUM(DataReadBytes + DataWriteBytes)/PERIOD"); FreeDataStorageCapacity (storage
# capacity metrics) is the available storage, its Sum the whole file system's. Only the names the dashboard uses.
FSX_LUSTRE = CloudWatchMetrics(
    "AWS/FSx",
    "docs.aws.amazon.com/fsx/latest/LustreGuide/fs-metrics.html (network I/O, metadata and storage capacity "
    "metrics), how_to_use_metrics.html",
    ("FileSystemId",),
    frozenset({"DataReadBytes", "DataWriteBytes", "DataReadOperations", "DataWriteOperations", "MetadataOperations",
               "FreeDataStorageCapacity"}),
)


def exporter_of(name: str) -> Exporter | None:
    """The exporter that documents `name`, if any."""
    return next((e for e in EXPORTERS if name in e.names), None)
