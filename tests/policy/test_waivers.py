"""Exceptions to the pack's rules belong to whoever owns the pack, never to the stack being checked: a stack
that opens its login to the internet (0.0.0.0/0 in `slurm.login.allowedCidrs`) fails
`no-world-ssh` unless the pack's config for that stack (policy/config/<stack>.json) waives it; `pulumi
preview` and `slurm-eks policy` read that file alike and agree.

Online, this drives pulumi-policy's own analyzer, the gRPC servicer `PolicyPack(...)` serves (without its
server): GetAnalyzerInfo (the config schema Pulumi checks the file against), Configure (the config the Pulumi
CLI sends after reconciling the file, pulumi/pulumi pkg/resource/analyzer/config.go ReconcilePolicyPackConfig),
then Analyze per resource and AnalyzeStack.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer

from policy.model import ENFORCEMENT, Enforcement
from policy.pack import policies
from policy.pack_config import CONFIG_DIR, PackConfig, PackConfigError, for_stack, parse
from policy.ruleset import RULES, evaluate
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import shipped_plan
from tests.policy.broken import INGRESS, _world_ssh_rule
from tests.slinky.helpers import plan_of, variant

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

REPO = Path(__file__).resolve().parents[2]
LOGIN_SET = "kubernetes:slinky.slurm.net/v1beta1:LoginSet"
WAIVER = {"no-world-ssh": {"allowPublicLoginSsh": True}}
LEVELS = {"advisory": proto.ADVISORY, "mandatory": proto.MANDATORY, "remediate": proto.REMEDIATE,
          "disabled": proto.DISABLED}
ONLINE_LEVELS = {proto.ADVISORY: Enforcement.advisory, proto.MANDATORY: Enforcement.mandatory}
Found = set[tuple[str, str, str]]  # (rule, urn, enforcement)


@pytest.fixture(scope="module")
def open_login(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """prod, its login open to the internet (the stack file alone cannot allow it: the pack's waiver does)."""
    raw = variant("prod", lambda r: r["slurm"]["login"].update(allowedCidrs=["0.0.0.0/0"]))
    return plan_of(raw, tmp_path_factory.mktemp("open"), "open")


def analyzer() -> _PolicyAnalyzerServicer:
    return _PolicyAnalyzerServicer("slurm-eks", "0.1.0", policies(), EnforcementLevel.MANDATORY)


def cli_config(raw: Mapping[str, Any], pack: _PolicyAnalyzerServicer) -> dict[str, tuple[str, dict[str, Any]]]:
    """What the Pulumi CLI sends to Configure for a --policy-pack-config file (config.go): each policy's level
    and schema defaults, then `all`'s level, then each policy's own level and properties."""
    info = pack.GetAnalyzerInfo(None, None)
    names = {v: k for k, v in LEVELS.items()}

    def defaults(policy: proto.PolicyInfo) -> dict[str, Any]:
        schema = json_format.MessageToDict(policy.configSchema).get("properties", {})
        return {k: v["default"] for k, v in schema.items() if "default" in v}

    result = {p.name: (names[p.enforcementLevel], defaults(p)) for p in info.policies}
    entries = {k: ({"enforcementLevel": v} if isinstance(v, str) else dict(v)) for k, v in raw.items()}
    if "enforcementLevel" in entries.get("all", {}):
        result = {k: (entries["all"]["enforcementLevel"], props) for k, (_, props) in result.items()}
    for name, entry in entries.items():
        if name in result:
            level = entry.pop("enforcementLevel", result[name][0])
            result[name] = (level, {**result[name][1], **entry})
    return result


def online(plan: Plan, raw_config: Mapping[str, Any]) -> Found:
    pack = analyzer()
    request = proto.ConfigureAnalyzerRequest()
    for name, (level, properties) in cli_config(raw_config, pack).items():
        struct = struct_pb2.Struct()
        struct.update(properties)
        request.policyConfig[name].CopyFrom(proto.PolicyConfig(enforcementLevel=LEVELS[level], properties=struct))
    pack.Configure(request, None)
    found: Found = set()
    resources = []
    for r in plan.resources:
        properties = struct_pb2.Struct()
        properties.update(r.inputs)
        options = proto.AnalyzerResourceOptions()
        response = pack.Analyze(proto.AnalyzeRequest(type=r.type, properties=properties, urn=r.urn, name=r.name,
                                                     options=options), None)
        found |= {(d.policyName, d.urn or r.urn, ONLINE_LEVELS[d.enforcementLevel]) for d in response.diagnostics}
        resources.append(proto.AnalyzerResource(type=r.type, properties=properties, urn=r.urn, name=r.name,
                                                options=options, dependencies=r.dependencies))
    response = pack.AnalyzeStack(proto.AnalyzeStackRequest(resources=resources), None)
    return found | {(d.policyName, d.urn, ONLINE_LEVELS[d.enforcementLevel]) for d in response.diagnostics}


def offline(plan: Plan, raw_config: Mapping[str, Any]) -> Found:
    return {(v.rule, v.urn, ENFORCEMENT[v.severity]) for v in evaluate(plan.resources, parse(raw_config, RULES))}


def login_urn(plan: Plan) -> str:
    (login,) = plan.of_type(LOGIN_SET)
    return login.urn


def test_the_stack_cannot_waive_no_world_ssh(open_login: Plan) -> None:
    login = login_urn(open_login)
    assert ("no-world-ssh", login, Enforcement.mandatory) in offline(open_login, {})
    # Nothing the stack writes on its resources speaks for the pack.
    (resource,) = open_login.of_type(LOGIN_SET)
    annotations = resource.inputs["spec"]["service"]["metadata"]["annotations"]
    assert not [k for k in annotations if k.startswith("slurm-eks.io/")]


def test_the_packs_config_for_the_stack_waives_it(open_login: Plan) -> None:
    assert not [f for f in offline(open_login, WAIVER) if f[0] == "no-world-ssh"]


def test_a_waiver_covers_the_login_load_balancer_only() -> None:
    plan, urn = _world_ssh_rule()  # port 22 from 0.0.0.0/0 on a security group rule
    assert plan.by_urn()[urn].type == INGRESS
    assert ("no-world-ssh", urn, Enforcement.mandatory) in offline(plan, WAIVER)


CONFIGS: dict[str, dict[str, Any]] = {
    "none": {},
    "waiver": WAIVER,
    "waiver off": {"no-world-ssh": {"allowPublicLoginSsh": False}},
    "rule advisory": {"no-world-ssh": "advisory"},
    "rule disabled": {"no-world-ssh": {"enforcementLevel": "disabled"}},
    "all advisory, one mandatory": {"all": "advisory", "no-world-ssh": "mandatory"},
    "remediate": {"no-world-ssh": "remediate"},
}


@pytest.mark.parametrize("name", CONFIGS)
def test_pulumi_preview_and_slurm_eks_policy_agree(open_login: Plan, name: str) -> None:
    found = offline(open_login, CONFIGS[name])
    assert online(open_login, CONFIGS[name]) == found
    ssh = {level for rule, urn, level in found if rule == "no-world-ssh" and urn == login_urn(open_login)}
    expected = {"none": {Enforcement.mandatory}, "waiver": set(), "waiver off": {Enforcement.mandatory},
                "rule advisory": {Enforcement.advisory}, "rule disabled": set(),
                "all advisory, one mandatory": {Enforcement.mandatory}, "remediate": {Enforcement.mandatory}}
    assert ssh == expected[name]


def test_the_pack_advertises_the_waiver_with_its_default() -> None:
    info = {p.name: p for p in analyzer().GetAnalyzerInfo(None, None).policies}
    schema = json_format.MessageToDict(info["no-world-ssh"].configSchema)
    assert schema["properties"]["allowPublicLoginSsh"]["type"] == "boolean"
    assert schema["properties"]["allowPublicLoginSsh"]["default"] is False


def test_every_stack_has_a_pack_config_pulumi_accepts() -> None:
    stacks = {p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (REPO / "stacks").glob("Pulumi.*.yaml")}
    assert {p.stem for p in CONFIG_DIR.glob("*.json")} == stacks
    info = {p.name: p for p in analyzer().GetAnalyzerInfo(None, None).policies}
    for stack in stacks:
        raw = json.loads((CONFIG_DIR / f"{stack}.json").read_text())
        for policy, entry in raw.items():
            # Pulumi validates each policy's properties against {"type": "object", "properties": ...} (config.go).
            schema = {"type": "object", **json_format.MessageToDict(info[policy].configSchema)}
            properties = {k: v for k, v in entry.items() if k != "enforcementLevel"}
            jsonschema.validate(properties, schema)
        config = for_stack(stack, RULES)
        assert config.source == CONFIG_DIR / f"{stack}.json"
        assert all(config.level(r) is r.enforcement for r in RULES)  # the shipped files waive nothing
        assert config.settings_of(next(r for r in RULES if r.name == "no-world-ssh")) == \
            {"allowPublicLoginSsh": False}


def test_the_shipped_stacks_pass_with_their_pack_config() -> None:
    for stack in ("dev", "prod"):
        assert evaluate(shipped_plan(stack).resources, for_stack(stack, RULES)) == []


@pytest.mark.parametrize(("raw", "words"), [
    ({"no-world-ssh": {"allowPublicSSH": True}}, "not a config property"),
    ({"no-world-ssh": {"allowPublicLoginSsh": "yes"}}, "Expected: boolean"),
    ({"no-world-sh": "disabled"}, "no such policy"),
    ({"no-world-ssh": "off"}, "not a valid enforcement level"),
    ({"no-world-ssh": 1}, "must be a string or object"),
    ({"all": {"allowPublicLoginSsh": True}}, "enforcement level only"),
    (["no-world-ssh"], "not a JSON object"),
])
def test_a_config_pulumi_would_refuse_or_that_misspells_a_waiver_is_an_error(raw: Any, words: str) -> None:
    with pytest.raises(PackConfigError, match=words):
        parse(raw, RULES)


def test_no_file_means_the_packs_defaults(tmp_path: Path) -> None:
    config = for_stack("nonexistent-stack", RULES)
    assert config.source is None and config == PackConfig(config.levels, config.settings)
    assert all(config.level(r) is r.enforcement for r in RULES)
    empty = tmp_path / "empty.json"
    empty.write_text("\n")  # Pulumi accepts an empty file too
    assert for_stack("any", RULES, empty).levels == config.levels
