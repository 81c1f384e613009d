"""slurm/agent/contract.py: the one definition both sides use. The documents the stack writes are the documents
the agents read, key by key, and a document that breaks the contract is refused with where it breaks."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from components.config.validation import parse_cluster_config
from components.lifecycle.node_repair import settings
from components.slinky.accounts_document import desired_document
from slurm.agent import contract
from tests.config.helpers import raw_config


def config(stack: str) -> Any:
    return parse_cluster_config(raw_config(stack), stack)[0]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_settings_round_trip_through_json(stack: str) -> None:
    written = settings(config(stack))
    assert contract.LifecycleSettings.parse(json.loads(written.json())) == written


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_accounts_document_round_trips_through_json(stack: str) -> None:
    written = desired_document(config(stack), "c1")
    assert contract.AccountsDocument.parse(json.loads(written.json())) == written


@pytest.mark.parametrize(("path", "missing"), [
    (("repair",), "settings: missing key 'repair'"),
    (("repair", "maxPerHour"), "settings.repair: missing key 'maxPerHour'"),
    (("activeChecks", "outputDir"), "settings.activeChecks: missing key 'outputDir'"),
    (("topology", "podSelector"), "settings.topology: missing key 'podSelector'"),
])
def test_a_settings_document_without_a_key_says_which(path: tuple[str, ...], missing: str) -> None:
    document = json.loads(settings(config("prod")).json())
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    with pytest.raises(contract.DocumentError, match=missing.replace(".", r"\.")):
        contract.LifecycleSettings.parse(document)


def test_an_accounts_document_of_another_format_is_refused() -> None:
    document = json.loads(desired_document(config("prod"), "c1").json())
    document["format"] = 2
    with pytest.raises(contract.DocumentError, match="format 2: this reconcile reads format 1"):
        contract.AccountsDocument.parse(document)
    del document["format"]
    with pytest.raises(contract.DocumentError, match="format None"):
        contract.AccountsDocument.parse(document)


def test_the_ec2_calls_follow_the_steps_the_settings_turn_on() -> None:
    prod = settings(config("prod"))
    assert prod.ec2_calls() == [contract.TOPOLOGY_EC2_CALL]  # EFA partitions, no Capacity Block
    assert settings(config("dev")).ec2_calls() == []  # no AWS role at all
    with_block = contract.LifecycleSettings(**{**prod.__dict__, "capacity_blocks": {"p": ["cr-0"]}})
    assert with_block.ec2_calls() == [contract.TOPOLOGY_EC2_CALL, contract.CAPACITY_BLOCK_EC2_CALL]


def test_the_contract_is_standard_library_only() -> None:
    """components/ imports it; importing it must not pull the agents' clients in (the import-linter contract
    `agent-contract` holds the source to it; this holds what a fresh interpreter loads)."""
    import subprocess
    code = ("import sys; import slurm.agent.contract; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('boto3', 'botocore', 'kubernetes', 'prometheus_client', 'urllib3', 'yaml')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
