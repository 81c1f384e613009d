"""The twin of each shipped stack, brought up once per test session and shared by the journey modules (pytest runs
every test of one stack's twin, then the next's)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from components.config.cluster import FULL_KEY
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from scripts.twin.cluster import Twin
from tests.config.helpers import raw_config
from tests.conftest import require_slurm, unavailable
from tests.plan.fixtures import shipped_plan

# Each stack's researcher: a declared user in an account every partition of the stack admits.
USERS = {"dev": "dev", "prod": "alice"}
# Every pod's users can enter it (pytest's own tmp is root's alone, 0700).
STATE_ROOT = Path("/var/tmp/slurm-eks-twin-tests")
# A stack no shipped file has, for the journey of one module only (`indirect` parametrization of stack_twin):
# dev with its partition replaced by a Trainium2 one named `trainium`, the partition TorchNeuron runs on
# (docs/trainium.md says why prod's `trainium` stays trn1). Its image is a team registry's TorchNeuron build, as
# docs/trainium.md asks for: no public tag of the TorchNeuron training image could be pinned.
TRAINIUM2 = "dev-trn2"
TORCHNEURON_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/torchneuron-training:2.14"
VARIANT_STACKS = STATE_ROOT / "stacks"
VARIANT_USERS = {TRAINIUM2: "dev"}


def trainium2_stack() -> Path:
    """Writes the dev-trn2 stack file; returns its stacks directory (what `--stacks-dir` takes)."""
    raw = raw_config("dev")
    raw["partitions"] = {"trainium": {"instanceTypes": ["trn2.48xlarge"], "maxNodes": 2, "efa": True,
                                      "default": True, "maxTime": "1-00:00:00", "image": TORCHNEURON_IMAGE}}
    raw["network"]["efaAvailabilityZone"] = raw["network"]["availabilityZones"][0]  # EFA stays in one zone
    VARIANT_STACKS.mkdir(mode=0o755, parents=True, exist_ok=True)
    (VARIANT_STACKS / f"Pulumi.{TRAINIUM2}.yaml").write_text(yaml.safe_dump({"config": {FULL_KEY: raw}}))
    return VARIANT_STACKS


def twin_plan(stack: str) -> Plan:
    if stack == TRAINIUM2:
        plan, _ = run_plan(stack, trainium2_stack())
        return plan
    return shipped_plan(stack)


@pytest.fixture(scope="session", params=sorted(USERS))
def stack_twin(request: pytest.FixtureRequest) -> Iterator[tuple[str, Twin]]:
    require_slurm()
    if os.geteuid() != 0:
        unavailable("the twin runs pods in network namespaces: run as root")
    STATE_ROOT.mkdir(mode=0o755, exist_ok=True)
    twin = Twin(twin_plan(request.param), STATE_ROOT / request.param)
    twin.up()
    try:
        yield request.param, twin
    finally:
        twin.down()


