"""Every IAM policy document in the offline plans of the shipped stacks passes parliament (PyPI 1.6.4, an IAM
policy linter with AWS's action and resource database), except for the false positives listed here."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import re
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from components.aws.iam import Scope
from components.compute.karpenter import controller_policy
from scripts.checks.iam_policy import action_match, glob_match
from tests.conftest import require_module
from tests.plan.fixtures import shipped_plan

# parliament 1.6.4 locates its two data files with pkg_resources at import, which setuptools >= 81 no longer
# ships: lend it that one function while it imports.
_LEND = importlib.util.find_spec("pkg_resources") is None
if _LEND:
    sys.modules["pkg_resources"] = types.SimpleNamespace(  # type: ignore[assignment]
        resource_filename=lambda package, name: str(importlib.resources.files(package) / name))
try:
    parliament = require_module("parliament", "make test installs it (the dev extra): pip install parliament==1.6.4")
finally:
    if _LEND:
        del sys.modules["pkg_resources"]

POLICY_INPUTS = ("policy", "assumeRolePolicy")
NOT_IAM = ("aws:ecr/lifecyclePolicy:LifecyclePolicy",)  # a `policy` input that is ECR's image expiry rules


@dataclass(frozen=True)
class Issue:
    """One parliament finding; a RESOURCE_MISMATCH is split into one per action it lists."""

    kind: str
    detail: Any
    statement: dict[str, Any]
    document: dict[str, Any]
    trust: bool


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _granted_elsewhere(issue: Issue) -> bool:
    """The action is allowed on a resource of the required type by another statement of the document."""
    action, wanted = issue.detail["action"], issue.detail["required_format"]
    return any(
        other is not issue.statement and other.get("Effect") == "Allow"
        and any(action_match(a, action) for a in _list(other.get("Action", [])))
        and any(r == "*" if wanted == "*" else glob_match(wanted, r) for r in _list(other.get("Resource", [])))
        for other in issue.document["Statement"])


# (kind, when, why): every finding not matched here fails the test.
KNOWN_FALSE_POSITIVES: list[tuple[str, Callable[[Issue], bool], str]] = [
    ("RESOURCE_MISMATCH", _granted_elsewhere,
     "IAM authorizes each resource of a multi-resource call (RunInstances, CreateSnapshot, AttachVolume) "
     "separately; upstream scopes them in separate statements"),
    ("RESOURCE_MISMATCH", lambda i: i.detail["action"] == "ssm:GetParameter" and all(
        re.fullmatch(r"arn:[a-z-]+:ssm:[a-z0-9-]+::parameter/aws/service/\*", r)
        for r in _list(i.statement["Resource"])),
     "AWS's public parameters have no account in their ARN; parliament's format wants one"),
    ("UNKNOWN_ACTION", lambda i: i.detail == "Unknown action ec2:CopyVolumes",
     "EC2's CopyVolumes is newer than parliament 1.6.4's action database"),
    ("UNKNOWN_FEDERATION_SOURCE", lambda i: ":oidc-provider/oidc.eks." in i.detail,
     "parliament knows SAML and a few web identity providers, not IAM OIDC providers (IRSA)"),
    ("UNKNOWN_CONDITION_FOR_ACTION", lambda i: bool(re.fullmatch(
        r"Unknown condition oidc\.eks\.[^ ]+:(sub|aud) for action sts:AssumeRoleWithWebIdentity", i.detail)),
     "an OIDC provider's condition keys are named after its issuer, so no database lists them"),
    ("RESOURCE_STAR", lambda i: "Principal" in i.statement and all(
        a.startswith("kms:") for a in _list(i.statement.get("Action", []))),
     "in a key policy `Resource: *` means this key (AWS KMS Developer Guide, key-policy-overview.html); a "
     "statement with a Principal and only kms: actions is one"),
    ("RESOURCE_STAR", lambda i: i.trust,
     "the `Resource: *` this test adds to a trust policy (which has none) so that parliament lints it"),
]


def issues(document: dict[str, Any], trust: bool = False) -> Iterator[Issue]:
    if trust:  # without a Resource parliament stops at MALFORMED before reading the statement
        document = {**document, "Statement": [{**s, "Resource": "*"} for s in document["Statement"]]}
    policy = parliament.analyze_policy_string(json.dumps(document))
    statement_of = {id(finding): statement for analysed, statement in zip(policy.statements, document["Statement"],
                                                                           strict=True)
                    for finding in analysed.findings}
    for finding in policy.findings:
        details = finding.detail if finding.issue == "RESOURCE_MISMATCH" else [finding.detail]
        for detail in details:
            yield Issue(finding.issue, detail, statement_of.get(id(finding), {}), document, trust)


def unexplained(document: dict[str, Any], trust: bool = False) -> list[tuple[str, Any]]:
    return [(i.kind, i.detail) for i in issues(document, trust)
            if not any(kind == i.kind and when(i) for kind, when, _ in KNOWN_FALSE_POSITIVES)]


def plan_documents(stack: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(`name (type) input`, document, is a trust policy) for every policy input of an AWS resource."""
    for resource in shipped_plan(stack).resources:
        for key in POLICY_INPUTS:
            text = resource.inputs.get(key)
            if resource.type.startswith("aws:") and resource.type not in NOT_IAM and isinstance(text, str) \
                    and text.startswith("{"):
                yield f"{resource.name} ({resource.type}) {key}", json.loads(text), key == "assumeRolePolicy"


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_parliament_finds_nothing_in_the_plan(stack: str) -> None:
    documents = list(plan_documents(stack))
    # Not vacuous: role policies, trust policies and the queue policy are all linted.
    assert {"rolePolicy:RolePolicy) policy", "role:Role) assumeRolePolicy", "queuePolicy:QueuePolicy) policy"} <= {
        label.split("/", 1)[1] for label, _, _ in documents}
    assert {label: found for label, document, trust in documents if (found := unexplained(document, trust))} == {}


def test_it_flags_list_instance_profiles_scoped_to_instance_profiles() -> None:
    # The statement this project shipped before, in the otherwise current policy.
    policy = controller_policy(Scope("aws", "us-west-2", "123456789012"), "c1", "arn:aws:sqs:us-west-2:123456789012:q",
                               "arn:aws:iam::123456789012:role/n")
    policy["Statement"] = [s for s in policy["Statement"] if s["Sid"] != "AllowUnscopedInstanceProfileListAction"]
    for statement in policy["Statement"]:
        if statement["Sid"] == "AllowInstanceProfileReadActions":
            statement["Action"] = ["iam:GetInstanceProfile", "iam:ListInstanceProfiles"]
    found = unexplained(policy)  # once per IAM entry of parliament's database, which has two
    assert found and all(f == ("RESOURCE_MISMATCH", {"action": "iam:ListInstanceProfiles", "required_format": "*"})
                         for f in found)


def test_it_flags_an_unknown_action_in_a_trust_policy() -> None:
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRoles"}]}
    assert unexplained(trust, trust=True) == [("UNKNOWN_ACTION", "Unknown action sts:AssumeRoles")]


def test_it_flags_a_private_parameter_arn_without_an_account() -> None:
    # Only AWS's public parameters have no account: this statement matches no parameter of ours.
    policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "arn:aws:ssm:us-west-2::parameter/slurm/*"}]}
    assert unexplained(policy) == [("RESOURCE_MISMATCH", {"action": "ssm:GetParameter",
                                                          "required_format": "arn:*:ssm:*:*:parameter/*"})]
