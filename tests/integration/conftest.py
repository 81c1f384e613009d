"""Fixtures of the tests that run the dev stack's GPU NodeSet as dynamic nodes on the local Slurm."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from tests.config.helpers import raw_config
from tests.integration.slinky_nodes import NodeSet, slinky_nodeset

STACK = "dev"


@pytest.fixture(scope="module")
def config() -> ClusterConfig:
    return parse_cluster_config(raw_config(STACK), STACK)[0]


@pytest.fixture(scope="module")
def nodeset(config: ClusterConfig) -> NodeSet:
    """The dev stack's first GPU partition's NodeSet."""
    gpu_partitions = [n for n, p in config.partitions.items() if partition_instance(p).accelerator == "nvidia"]
    return slinky_nodeset(config, gpu_partitions[0])


@pytest.fixture
def workdir() -> Iterator[Path]:
    """Job scripts and outputs where the person the jobs run as may read and write (pytest's own tmp_path is
    root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="slurm-eks-jobs-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)
