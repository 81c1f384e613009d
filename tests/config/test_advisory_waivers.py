"""Advisory waivers (components/config/advisory_waivers.py): granted per stack, with a reason, an approver and an
expiry, in the stack's pack config; the config rule `slurm-advisories` and the pack's `slurm-patched` honour the
same waiver from that one file."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from components.config.advisory_waivers import POLICY, PROPERTY, SCHEMA, WaiverError, parse
from components.config.problems import ConfigError
from components.config.stack_context import PACK_CONFIG_DIR, StackContext
from components.config.validation import parse_cluster_config
from components.findings import Finding
from policy.pack_config import PackConfigError, load
from policy.rules import SLURM_PATCHED, slurm_patched
from policy.ruleset import RULES
from tests.config.helpers import raw_config

TODAY = date(2026, 10, 1)
WAIVER = {"advisory": "CVE-2026-65107", "reason": "hotfix for the login NLB; 25.11.8 rolls out next week",
          "approvedBy": "security@example.com", "expires": "2026-10-15"}
AFFECTED_IMAGE = "ghcr.io/slinkyproject/slurmctld:25.11.7-ubuntu24.04"
CONTROLLER = {"spec": {"slurmctld": {"image": AFFECTED_IMAGE}}}


def pack_file(tmp_path: Path, *waivers: dict[str, Any]) -> Path:
    path = tmp_path / "stage.json"
    path.write_text(json.dumps({POLICY: {PROPERTY: list(waivers)}}))
    return path


def validate(pack: Path, version: str = "25.11.7", today: date = TODAY) -> list[Finding]:
    raw = raw_config("dev")
    raw["slurm"]["version"] = version
    _, warnings = parse_cluster_config(raw, "test.yaml", StackContext("stage", pack_config=pack, today=today))
    return [w for w in warnings if w.rule == "slurm-advisories"]


def refused(pack: Path, version: str = "25.11.7", today: date = TODAY) -> list[Finding]:
    with pytest.raises(ConfigError) as caught:
        validate(pack, version, today)
    return [f for f in caught.value.findings if f.rule == "slurm-advisories"]


def test_without_a_waiver_the_advisory_is_an_error(tmp_path: Path) -> None:
    assert refused(pack_file(tmp_path))[0].severity == "error"


@pytest.mark.parametrize("name", ["CVE-2026-65107", "schedmd-2026-09"])  # a CVE of it, or its id
def test_an_unexpired_waiver_lowers_it_to_a_warning_that_says_so(tmp_path: Path, name: str) -> None:
    pack = pack_file(tmp_path, {**WAIVER, "advisory": name})
    found = validate(pack, today=date(2026, 10, 15))  # the expiry day itself still holds
    assert [(f.severity, f.path) for f in found] == [("warning", "slurm.version")]
    assert "Slurm 25.11.7 is affected by CVE-2026-65107" in found[0].message
    assert f"waived by waiver {pack} {POLICY}.{PROPERTY}[0]" in found[0].message
    assert "hotfix for the login NLB" in found[0].message and "expires 2026-10-15" in found[0].message
    assert "approved by security@example.com" in found[0].message and "before the waiver expires" in found[0].fix


def test_an_expired_waiver_is_refused_saying_how_to_renew(tmp_path: Path) -> None:
    found = refused(pack_file(tmp_path, WAIVER), today=date(2026, 10, 16))
    assert found[0].severity == "error" and "has expired" in found[0].message
    assert "expires 2026-10-15" in found[0].message
    assert '"25.11.8" or newer' in found[0].fix and "renew it: a later `expires`" in found[0].fix


def test_a_waiver_matching_no_advisory_of_the_release_is_stale(tmp_path: Path) -> None:
    found = validate(pack_file(tmp_path, WAIVER), version="25.11")  # the patched release: nothing to waive
    assert [(f.severity, f.path) for f in found] == [("warning", "slurm.version")]
    assert found[0].message.startswith("stale waiver") and f"remove it from {tmp_path / 'stage.json'}" in found[0].fix
    assert "stale" in validate(pack_file(tmp_path, {**WAIVER, "advisory": "CVE-1999-0001"}), version="25.11")[0].message


@pytest.mark.parametrize(("change", "words"), [
    ({"reason": None}, "[0].reason: missing; every waiver states reason"),
    ({"expires": None}, "[0].expires: missing; every waiver states expires: the last day it holds"),
    ({"approvedBy": " "}, "[0].approvedBy: ' '; every waiver states approvedBy"),
    ({"expires": "15/10/2026"}, "[0].expires: '15/10/2026' is not an ISO date"),
    ({"expires": "2026-02-30"}, "[0].expires: '2026-02-30' is not an ISO date"),
    ({"until": "2026-10-15"}, "[0]: unknown key 'until'"),
])
def test_a_waiver_stated_wrongly_is_refused_by_both(tmp_path: Path, change: dict[str, Any], words: str) -> None:
    entry = {k: v for k, v in {**WAIVER, **change}.items() if v is not None}
    pack = pack_file(tmp_path, entry)
    found = refused(pack, version="25.11")  # refused even on a patched release: the file itself is wrong
    assert any(words in f.message for f in found), found
    with pytest.raises(PackConfigError, match=re.escape(words)):
        load(pack, RULES)  # `slurm-eks policy` refuses the same file
    with pytest.raises(WaiverError, match="not a list of waivers"):
        parse({"advisory": "x"}, "here")


def test_the_pack_honours_the_same_file(tmp_path: Path) -> None:
    settings = load(pack_file(tmp_path, WAIVER), RULES).settings_of(SLURM_PATCHED)
    assert SLURM_PATCHED.evaluate(_Resource(), {}) != []  # no waiver: a violation
    assert slurm_patched(_Resource.type, CONTROLLER, settings, TODAY) == []
    lasting = load(pack_file(tmp_path, {**WAIVER, "expires": "2999-12-31"}), RULES).settings_of(SLURM_PATCHED)
    assert SLURM_PATCHED.evaluate(_Resource(), lasting) == []  # as `pulumi preview` runs it, today's date
    expired = slurm_patched(_Resource.type, CONTROLLER, settings, date(2026, 10, 16))
    assert len(expired) == 1 and "has expired" in expired[0] and "renew it" in expired[0]
    other = load(pack_file(tmp_path, {**WAIVER, "advisory": "CVE-1999-0001"}), RULES).settings_of(SLURM_PATCHED)
    assert slurm_patched(_Resource.type, CONTROLLER, other, TODAY)  # a waiver of another advisory waives nothing


def test_the_pack_advertises_the_schema_and_reads_the_stacks_file_by_default() -> None:
    assert SLURM_PATCHED.config_schema == {PROPERTY: dict(SCHEMA)}
    assert SCHEMA["items"]["required"] == ["advisory", "reason", "approvedBy", "expires"]
    assert StackContext("prod").pack_config_file == PACK_CONFIG_DIR / "prod.json"
    for shipped in sorted(PACK_CONFIG_DIR.glob("*.json")):  # the shipped stacks waive no advisory
        assert load(shipped, RULES).settings_of(SLURM_PATCHED)[PROPERTY] == []


class _Resource:
    urn = "urn:pulumi:stage::slurm-eks::kubernetes:slinky.slurm.net/v1beta1:Controller::slurm"
    type = "kubernetes:slinky.slurm.net/v1beta1:Controller"
    name = "slurm"
    inputs = CONTROLLER
    dependencies = ()
