"""The node checks in Slinky's objects: ConfigMaps holding slurm/node/node-check.sh (as the NodeSet pods'
HealthCheckProgram, and as the Controller's Prolog and Epilog scripts) and each partition's expectations, the
NodeSet pod's volumes for them, and the dcgm-exporter job-mapping directory on GPU nodes.

The Controller's prologScriptRefs/epilogScriptRefs ConfigMaps are mounted into /etc/slurm and listed by file
name in slurm.conf (slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go and
controller_config.go buildPrologEpilogConf); slurmctld ships them to slurmd (components/slinky/health_settings.py).
HealthCheckProgram is not shipped by configless, so the NodeSet pods mount the script themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import slurm.node
from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.slinky.health_settings import DCGM_JOB_MAP_DIR, EPILOG_FILE, HEALTH_DIR, PROLOG_FILE, node_health_env

# node-check.sh is package data of slurm.health, shipped in a ConfigMap: the import makes the dependency visible.
SCRIPT = Path(slurm.node.__file__).parent / "node-check.sh"
SCRIPT_CONFIG_MAP = "slurm-eks-node-check"
PROLOG_CONFIG_MAP = "slurm-eks-prolog"
EPILOG_CONFIG_MAP = "slurm-eks-epilog"
VOLUME = "slurm-eks-health"
JOB_MAP_VOLUME = "dcgm-job-map"


def env_config_map(partition: str) -> str:
    return f"slurm-eks-health-{partition}"


def config_maps(config: ClusterConfig) -> dict[str, dict[str, str]]:
    """name -> data of every ConfigMap the checks need in the slurm namespace."""
    script = SCRIPT.read_text()
    maps = {SCRIPT_CONFIG_MAP: {"node-check.sh": script}, PROLOG_CONFIG_MAP: {PROLOG_FILE: script},
            EPILOG_CONFIG_MAP: {EPILOG_FILE: script}}
    for name, partition in config.partitions.items():
        maps[env_config_map(name)] = {"health.env": node_health_env(partition, config)}
    return maps


def controller_fields() -> dict[str, Any]:
    return {"prologScriptRefs": [{"name": PROLOG_CONFIG_MAP}], "epilogScriptRefs": [{"name": EPILOG_CONFIG_MAP}]}


def has_gpus(name: str, config: ClusterConfig) -> bool:
    return partition_instance(config.partitions[name]).accelerator == "nvidia"


def nodeset_volumes(name: str, config: ClusterConfig) -> list[dict[str, Any]]:
    """The script (executable) and the partition's env file in one directory; on GPU partitions the node's
    dcgm-exporter job-mapping directory, which the prolog writes and the exporter on the same node reads."""
    volumes: list[dict[str, Any]] = [{"name": VOLUME, "projected": {"defaultMode": 0o555, "sources": [
        {"configMap": {"name": SCRIPT_CONFIG_MAP, "items": [{"key": "node-check.sh", "path": "node-check.sh"}]}},
        {"configMap": {"name": env_config_map(name), "items": [{"key": "health.env", "path": "health.env"}]}},
    ]}}]
    if has_gpus(name, config):
        volumes.append({"name": JOB_MAP_VOLUME, "hostPath": {"path": DCGM_JOB_MAP_DIR, "type": "DirectoryOrCreate"}})
    return volumes


def nodeset_mounts(name: str, config: ClusterConfig) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [{"name": VOLUME, "mountPath": HEALTH_DIR, "readOnly": True}]
    if has_gpus(name, config):
        mounts.append({"name": JOB_MAP_VOLUME, "mountPath": DCGM_JOB_MAP_DIR})
    return mounts
