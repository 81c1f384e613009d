"""The CPUs a job may ask per node: one definition (components/slinky/sizing.py `slurm_cpus`) that the NodeSet's
size and the rendered `#SBATCH --cpus-per-task` both come from, and the catalog's cores and threads it rests on.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import moto
import pytest

from components import catalog
from components.config.cluster import ClusterConfig
from components.slinky import sizing
from components.slinky.sizing import pod_cpus, schedulable_cpus, slurm_cpus
from components.slinky.specs import nodeset_spec
from jobs.render import render_job, target_for_partition
from tests.config.helpers import raw_config
from tests.slinky.helpers import config_of
from tests.slinky.test_node_fit import KARPENTER_ALLOCATABLE, one_partition_per_type, slurm_schedulable

# moto 5.2.5 (a dev dependency) ships EC2 DescribeInstanceTypes as recorded from AWS:
# moto/ec2/resources/instance_types.json.gz, one InstanceTypeInfo per type.
DESCRIBE_INSTANCE_TYPES = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"


def test_cores_and_threads_are_ec2s() -> None:
    recorded = json.loads(gzip.decompress(DESCRIBE_INSTANCE_TYPES.read_bytes()))
    for name, it in catalog.CATALOG.items():
        vcpu = recorded[name]["VCpuInfo"]
        assert (it.vcpu, it.cpu_cores, it.threads_per_core) == (
            vcpu["DefaultVCpus"], vcpu["DefaultCores"], vcpu["DefaultThreadsPerCore"]), name


def test_the_entrypoints_arithmetic_worked_out_by_hand() -> None:
    p5 = catalog.lookup("p5.48xlarge")  # 96 cores x 2 threads
    assert schedulable_cpus(p5, 190) == 190  # CoreSpecCount = 96 - 190 / 2 = 1: 95 cores, 190 CPUs
    assert schedulable_cpus(p5, 191) == 190  # 191 / 2 = 95 in bash: still one core kept back
    assert schedulable_cpus(p5, 192) == 192  # CoreSpecCount 0: not added
    assert schedulable_cpus(p5, 500) == 192  # negative: not added either
    assert schedulable_cpus(p5, 0) == 192  # POD_CPUS 0 (no limit): the entrypoint skips CoreSpecCount
    assert schedulable_cpus(catalog.lookup("g5.xlarge"), 3) == 2  # 2 cores: one kept back, 2 CPUs left
    # Quantity.Value() rounds a fractional limit up: 190.5 CPUs are POD_CPUS 191.
    assert (pod_cpus(190_000), pod_cpus(190_500), pod_cpus(0)) == (190, 191, 0)


def _configs() -> list[tuple[str, ClusterConfig]]:
    return [("dev", config_of(raw_config("dev"))), ("prod", config_of(raw_config("prod"))),
            ("every catalog type", one_partition_per_type())]


@pytest.mark.parametrize(("label", "config"), _configs(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_rendered_request_is_what_slurm_schedules_on_the_pod(label: str, config: ClusterConfig) -> None:
    """For every partition: `--cpus-per-task` equals what the NodeSet's pod gives, worked out from the pod's
    limit through Slinky's CoreSpecCount on each of the partition's types (tests/slinky/test_node_fit.py),
    and never more than that on any type."""
    for name, partition in config.partitions.items():
        nodeset = {"spec": nodeset_spec(name, config)}
        given = {slurm_schedulable(nodeset, catalog.lookup(t), KARPENTER_ALLOCATABLE[t][1])[0]
                 for t in partition.instance_types}
        script = render_job(target_for_partition(config, label, name, image="x:1"), ["jobs/train.py"])
        (asked,) = re.findall(r"^#SBATCH --cpus-per-task=(\d+)$", script, re.M)
        assert int(asked) == slurm_cpus(partition) == min(given), (label, name)
        assert int(asked) < min(catalog.lookup(t).vcpu for t in partition.instance_types), (label, name)


def test_a_smaller_pod_lowers_the_request_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """One definition: when the node leaves the pod less (another DaemonSet, other kube-reserved), the NodeSet
    and the job script move together."""
    config = config_of(raw_config("prod"))
    before = target_for_partition(config, "prod", "gpu-h100", image="x:1").cpus_per_node
    monkeypatch.setitem(sizing.DAEMONSET_REQUESTS, "another", catalog.Resources(4000, 0))
    after = target_for_partition(config, "prod", "gpu-h100", image="x:1").cpus_per_node
    limit = nodeset_spec("gpu-h100", config)["slurmd"]["resources"]["limits"]["cpu"]
    assert (before, after, limit) == (190, 186, "186")
