"""The plan's ConfigMaps carry settings, not our agents' code: the agents run from their image (slurm/agent/). The
scripts left are the ones Slinky's own images run, handed over the only way Slinky's API takes them: node-check.sh
as the slurmd pods' HealthCheckProgram and the Controller's Prolog/Epilog (prologScriptRefs/epilogScriptRefs), and
the identity init container's setup.sh and its sidecar's sync.sh, which run in the Slurm pods' own images
(components/slinky/identity.py)."""

from __future__ import annotations

import re

import pytest

from tests.plan.fixtures import shipped_plan

SLINKY_SCRIPTS = {("slurm-identity", "setup.sh"), ("slurm-identity", "sync.sh"),
                  ("slurm-eks-node-check", "node-check.sh"), ("slurm-eks-prolog", "prolog-slurm-eks.sh"),
                  ("slurm-eks-epilog", "epilog-slurm-eks.sh")}
PYTHON = re.compile(r"^(from \S+ import |import \S+$|def \w+\(|class \w+[(:])", re.M)


def programs(stack: str) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    scripts, python = set(), set()
    for config_map in shipped_plan(stack).of_type("kubernetes:core/v1:ConfigMap"):
        for key, value in (config_map.inputs.get("data") or {}).items():
            where = (config_map.inputs["metadata"]["name"], key)
            if isinstance(value, str) and value.startswith("#!"):
                scripts.add(where)
            if isinstance(value, str) and (key.endswith(".py") or PYTHON.search(value)):
                python.add(where)
    return scripts, python


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_config_map_carries_agent_code(stack: str) -> None:
    scripts, python = programs(stack)
    assert python == set()
    assert scripts == SLINKY_SCRIPTS


def test_the_check_finds_python_in_a_config_map() -> None:
    assert PYTHON.search("# the controller\nfrom slurm.agent import contract\n")
    assert PYTHON.search("import json\n") and PYTHON.search("def main(argv):\n")
    assert not PYTHON.search('{"namespace": "slurm", "repair": {"enabled": true}}')
