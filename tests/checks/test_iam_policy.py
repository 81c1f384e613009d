"""The IAM evaluator, operator by operator: each allows what AWS allows and denies what AWS denies."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from scripts.checks.iam_policy import Request, UnsupportedPolicy, Value, arn_match, evaluate

PROFILE = "arn:aws:iam::123456789012:instance-profile/karpenter/us-west-2/c1/uid/c1_1"


def allow(condition: dict[str, Any] | None = None, action: Any = "iam:CreateInstanceProfile",
          resource: Any = "arn:aws:iam::123456789012:instance-profile/*") -> dict[str, Any]:
    statement = {"Sid": "Under", "Effect": "Allow", "Action": action, "Resource": resource}
    return {**statement, "Condition": condition} if condition else statement


def decide(statements: list[dict[str, Any]], context: dict[str, Value] | None = None,
           action: str = "iam:CreateInstanceProfile", resource: str = PROFILE) -> tuple[bool, str]:
    decision = evaluate([("p", {"Version": "2012-10-17", "Statement": statements})],
                        Request(action, resource, context or {}))
    return decision.allowed, decision.why


def allowed(condition: dict[str, Any], context: dict[str, Value]) -> bool:
    return decide([allow(condition)], context)[0]


def test_an_allow_is_needed_and_an_explicit_deny_wins() -> None:
    assert decide([]) == (False, "no statement allows the action")
    assert decide([allow()]) == (True, "allowed by p/Under")
    deny = {"Sid": "Never", "Effect": "Deny", "Action": "iam:*", "Resource": "*"}
    assert decide([allow(), deny]) == (False, "explicitly denied by p/Never")
    # A Deny whose condition does not hold denies nothing.
    assert decide([allow(), {**deny, "Condition": {"Bool": {"aws:SecureTransport": "false"}}}],
                  {"aws:SecureTransport": "true"})[0]


def test_actions_match_case_insensitively_with_wildcards() -> None:
    assert decide([allow(action="IAM:create*")])[0]
    assert decide([allow(action="iam:CreateInstanceProfil?")])[0]
    assert not decide([allow(action="iam:CreateInstanceProfile?")])[0]
    assert not decide([allow(action="iam:Create")])[0]
    not_action = {"Sid": "AllButIam", "Effect": "Allow", "NotAction": ["iam:*"], "Resource": "*"}
    assert not decide([not_action])[0]
    assert decide([not_action], action="ec2:DescribeImages")[0]


def test_resources_match_segment_by_segment() -> None:
    assert arn_match("arn:aws:ec2:us-west-2:*:instance/*", "arn:aws:ec2:us-west-2:123456789012:instance/i-1")
    assert arn_match("arn:aws:ec2:us-west-2::image/*", "arn:aws:ec2:us-west-2::image/ami-1")
    assert arn_match("arn:aws:ssm:*::parameter/aws/service/*", "arn:aws:ssm:eu-west-1::parameter/aws/service/a/b")
    assert not arn_match("arn:aws:ec2:us-west-2:*:instance/*", "arn:aws:ec2:us-east-1:123456789012:instance/i-1")
    assert not arn_match("arn:aws-cn:ec2:*:*:instance/*", "arn:aws:ec2:us-west-2:123456789012:instance/i-1")
    # A wildcard never spans a segment: this five-part pattern is no ARN and matches none.
    assert not arn_match("arn:aws:ec2:*:instance/*", "arn:aws:ec2:us-west-2:123456789012:instance/i-1")
    assert arn_match("arn:aws:ec2:us-west-?:*:volume/*", "arn:aws:ec2:us-west-2:1:volume/vol-1")
    # Resource values are case-sensitive.
    assert not arn_match("arn:aws:iam::*:role/Node", "arn:aws:iam::1:role/node")


def test_an_action_only_allowed_on_star_is_denied_on_a_scoped_resource() -> None:
    # iam:ListInstanceProfiles has no resource-level permissions: IAM asks about `*`.
    scoped = allow(action=["iam:GetInstanceProfile", "iam:ListInstanceProfiles"])
    allowed_, why = decide([scoped], action="iam:ListInstanceProfiles", resource="*")
    assert not allowed_ and "grants it on ['arn:aws:iam::123456789012:instance-profile/*']" in why
    assert decide([allow(action="iam:ListInstanceProfiles", resource="*")],
                  action="iam:ListInstanceProfiles", resource="*")[0]


def test_not_resource() -> None:
    outside = {"Sid": "Outside", "Effect": "Allow", "Action": "iam:*",
               "NotResource": "arn:aws:iam::*:instance-profile/protected/*"}
    assert decide([outside])[0]
    assert not decide([outside], resource="arn:aws:iam::1:instance-profile/protected/x")[0]


def test_string_equals_needs_the_key_and_the_exact_value() -> None:
    condition = {"StringEquals": {"aws:RequestTag/kubernetes.io/cluster/c1": "owned"}}
    assert allowed(condition, {"aws:RequestTag/kubernetes.io/cluster/c1": "owned"})
    assert allowed(condition, {"AWS:REQUESTTAG/kubernetes.io/cluster/c1": "owned"})  # key names: any case
    assert not allowed(condition, {"aws:RequestTag/kubernetes.io/cluster/c1": "Owned"})  # values: exact
    assert not allowed(condition, {"aws:RequestTag/kubernetes.io/cluster/c2": "owned"})
    allowed_, why = decide([allow(condition)], {})
    assert not allowed_ and why == ("p/Under needs StringEquals aws:RequestTag/kubernetes.io/cluster/c1 ['owned']: "
                                    "the request does not carry aws:RequestTag/kubernetes.io/cluster/c1")
    # Values listed for one key are alternatives; keys and operators all have to hold.
    either = {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}}
    assert allowed(either, {"iam:PassedToService": "ec2.amazonaws.com.cn"})
    both = {"StringEquals": {"aws:RequestTag/a": "1", "aws:RequestTag/b": "2"}}
    assert not allowed(both, {"aws:RequestTag/a": "1", "aws:RequestTag/b": "3"})


def test_string_not_equals_holds_for_a_missing_key() -> None:
    condition = {"StringNotEquals": {"aws:RequestTag/env": ["prod", "staging"]}}
    assert allowed(condition, {"aws:RequestTag/env": "dev"})
    assert not allowed(condition, {"aws:RequestTag/env": "prod"})
    assert allowed(condition, {})  # the documented exception for negated operators


def test_string_like_wildcards_and_the_empty_value() -> None:
    condition = {"StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}
    assert allowed(condition, {"aws:RequestTag/karpenter.sh/nodepool": "gpu"})
    # Karpenter's dry runs send the tag with an empty value: `*` matches it.
    assert allowed(condition, {"aws:RequestTag/karpenter.sh/nodepool": ""})
    assert not allowed(condition, {"aws:RequestTag/karpenter.sh/nodeclaim": "gpu"})
    assert not allowed({"StringLike": {"ssm:Name": "/aws/service/?ks/*"}}, {"ssm:Name": "/aws/service/ecs/x"})
    assert allowed({"StringNotLike": {"ssm:Name": "/private/*"}}, {"ssm:Name": "/aws/service/eks"})
    assert not allowed({"StringNotLike": {"ssm:Name": "/private/*"}}, {"ssm:Name": "/private/key"})


def test_arn_like_and_arn_equals() -> None:
    queue = "arn:aws:sqs:us-west-2:123456789012:c1-karpenter"
    assert allowed({"ArnLike": {"aws:SourceArn": "arn:aws:sqs:*:123456789012:c1-*"}}, {"aws:SourceArn": queue})
    assert not allowed({"ArnLike": {"aws:SourceArn": "arn:aws:sqs:*:210987654321:*"}}, {"aws:SourceArn": queue})
    assert allowed({"ArnEquals": {"aws:SourceArn": queue}}, {"aws:SourceArn": queue})
    assert not allowed({"ArnEquals": {"aws:SourceArn": queue}}, {})
    assert allowed({"ArnNotLike": {"aws:SourceArn": "arn:aws:sns:*"}}, {})


def test_bool_compares_without_case() -> None:
    assert allowed({"Bool": {"aws:SecureTransport": "true"}}, {"aws:SecureTransport": "True"})
    assert allowed({"Bool": {"aws:SecureTransport": True}}, {"aws:SecureTransport": "true"})
    assert not allowed({"Bool": {"aws:SecureTransport": "true"}}, {"aws:SecureTransport": "false"})
    assert not allowed({"Bool": {"aws:SecureTransport": "true"}}, {})


def test_null_tests_presence() -> None:
    assert allowed({"Null": {"aws:TagKeys": "false"}}, {"aws:TagKeys": ("Name",)})
    assert not allowed({"Null": {"aws:TagKeys": "false"}}, {})
    assert not allowed({"Null": {"aws:TagKeys": "false"}}, {"aws:TagKeys": ()})  # an empty set is no key
    assert allowed({"Null": {"aws:RequestTag/x": "true"}}, {})
    assert not allowed({"Null": {"aws:RequestTag/x": "true"}}, {"aws:RequestTag/x": "1"})


def test_for_all_values_holds_for_every_value_and_for_no_key() -> None:
    condition = {"ForAllValues:StringEquals": {"aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim",
                                                               "Name"]}}
    assert allowed(condition, {"aws:TagKeys": ("Name", "karpenter.sh/nodeclaim")})
    assert not allowed(condition, {"aws:TagKeys": ("Name", "karpenter.sh/nodepool")})
    assert allowed(condition, {})  # vacuously true: why EBS's policy pairs it with Null
    reserved = {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["ebs.csi.aws.com/cluster"]},
                "Null": {"aws:TagKeys": "false"}}
    assert allowed(reserved, {"aws:TagKeys": ("team",)})
    assert not allowed(reserved, {"aws:TagKeys": ("team", "ebs.csi.aws.com/cluster")})
    assert not allowed(reserved, {})


def test_for_any_value_needs_one_match_and_the_key() -> None:
    condition = {"ForAnyValue:StringLike": {"aws:TagKeys": "kubernetes.io/cluster/*"}}
    assert allowed(condition, {"aws:TagKeys": ("Name", "kubernetes.io/cluster/c1")})
    assert not allowed(condition, {"aws:TagKeys": ("Name",)})
    assert not allowed(condition, {})


def test_if_exists_holds_for_a_missing_key_only() -> None:
    condition = {"StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": "c1"}}
    assert allowed(condition, {})
    assert allowed(condition, {"aws:RequestTag/eks:eks-cluster-name": "c1"})
    assert not allowed(condition, {"aws:RequestTag/eks:eks-cluster-name": "c2"})


@pytest.mark.parametrize(("condition", "context"), [
    ({"NumericLessThan": {"aws:MultiFactorAuthAge": "3600"}}, {"aws:MultiFactorAuthAge": "10"}),
    # A multivalued key needs a set qualifier: without one AWS's answer is not what it looks like.
    ({"StringEquals": {"aws:TagKeys": "Name"}}, {"aws:TagKeys": ("Name",)}),
    # Binary sorts before Bool: it must not be mistaken for it.
    ({"BinaryEquals": {"aws:RequestTag/cert": "QmluYXJ5"}}, {"aws:RequestTag/cert": "QmluYXJ5"}),
    # A misspelt set qualifier is no ForAnyValue.
    ({"ForSomeValue:StringLike": {"aws:TagKeys": "Name"}}, {"aws:TagKeys": ("Name",)}),
])
def test_what_it_does_not_model_is_an_error_not_a_guess(condition: dict[str, Any], context: dict[str, Value]) -> None:
    with pytest.raises(UnsupportedPolicy):
        decide([allow(condition)], context)


def test_a_resource_pattern_needs_all_six_arn_segments() -> None:
    queue = "arn:aws:sqs:us-west-2:123456789012:c1-karpenter"
    # Five segments are no ARN: the trailing `*` must not swallow the account and the resource.
    assert not arn_match("arn:aws:sqs:us-west-2:*", queue)
    assert arn_match("arn:aws:sqs:us-west-2:*:*", queue)
    # A six-part pattern against a five-part resource (no ARN) matches nothing, and neither the other way round.
    assert not arn_match("arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:us-west-2:instance/i-1")
    assert not arn_match("arn:aws:ec2:*:instance/*", "arn:aws:ec2:us-west-2:123456789012:instance/i-1")
    # An empty Resource (an unset variable) matches nothing: only `*` alone matches anything.
    assert not arn_match("", PROFILE)


def test_colons_inside_the_resource_segment_belong_to_it() -> None:
    stream = "arn:aws:logs:us-west-2:123456789012:log-group:/aws/eks/c1/cluster:log-stream:kube-apiserver-1"
    assert arn_match("arn:aws:logs:us-west-2:123456789012:log-group:/aws/eks/c1/cluster:*", stream)
    assert arn_match("arn:aws:logs:*:*:log-group:/aws/eks/c1/cluster:log-stream:*", stream)
    assert not arn_match("arn:aws:logs:*:*:log-group:/aws/eks/c2/cluster:*", stream)


def test_only_star_and_question_mark_are_wildcards_in_string_like() -> None:
    condition = {"StringLike": {"aws:RequestTag/Name": "c1 (gpu) nodes*"}}
    assert allowed(condition, {"aws:RequestTag/Name": "c1 (gpu) nodes-1"})
    assert not allowed(condition, {"aws:RequestTag/Name": "c1-x(gpu)-nodes-1"})
    assert not allowed({"StringLike": {"aws:RequestTag/cost": "$100*"}}, {"aws:RequestTag/cost": "x100"})


def test_null_explains_a_present_key_and_only_true_asks_for_absence() -> None:
    allowed_, why = decide([allow({"Null": {"aws:RequestTag/x": "true"}})], {"aws:RequestTag/x": "1"})
    assert (allowed_, why) == (False, "p/Under needs Null aws:RequestTag/x ['true']: "
                                      "the request carries aws:RequestTag/x")
    allowed_, why = decide([allow({"Null": {"aws:RequestTag/x": "false"}})], {})
    assert (allowed_, why) == (False, "p/Under needs Null aws:RequestTag/x ['false']: "
                                      "the request does not carry aws:RequestTag/x")
    # Anything but "true" (in any case) asks for the key to be present.
    assert allowed({"Null": {"aws:RequestTag/x": "yes"}}, {"aws:RequestTag/x": "1"})
    assert not allowed({"Null": {"aws:RequestTag/x": "yes"}}, {})
    assert allowed({"Null": {"aws:RequestTag/x": "TRUE"}}, {})


def test_a_statement_without_sid_is_labelled_by_its_position() -> None:
    unnamed = {"Effect": "Allow", "Action": "iam:CreateInstanceProfile", "Resource": "*"}
    assert decide([unnamed]) == (True, "allowed by p/statement 1")
    other = {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "*"}
    assert decide([other, unnamed]) == (True, "allowed by p/statement 2")
    single = evaluate([("p", {"Version": "2012-10-17", "Statement": unnamed})],
                      Request("iam:CreateInstanceProfile", PROFILE))
    assert (single.allowed, single.why) == (True, "allowed by p/statement 1")


def test_statements_for_other_actions_or_resources_do_not_stop_the_search() -> None:
    ec2 = {"Sid": "Ec2", "Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "*"}
    roles = {"Sid": "Roles", "Effect": "Allow", "Action": "iam:*", "Resource": "arn:aws:iam::123456789012:role/*"}
    assert decide([ec2, allow()]) == (True, "allowed by p/Under")
    assert decide([roles, allow()]) == (True, "allowed by p/Under")
    never = {"Sid": "Never", "Effect": "Deny", "Action": "iam:*", "Resource": "*"}
    assert decide([ec2, roles, allow(), never]) == (False, "explicitly denied by p/Never")


def test_a_deny_whose_condition_fails_is_no_near_miss() -> None:
    deny = {"Sid": "Plain", "Effect": "Deny", "Action": "iam:*", "Resource": "*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    assert decide([deny], {"aws:SecureTransport": "true"}) == (False, "no statement allows the action")


def test_effect_is_case_sensitive_like_iam() -> None:
    shouting = {**allow(), "Sid": "Shouting", "Effect": "ALLOW"}
    assert decide([shouting]) == (False, "no statement allows the action")
    lower_deny = {"Sid": "Lower", "Effect": "deny", "Action": "iam:*", "Resource": "*"}
    assert decide([allow(), lower_deny]) == (True, "allowed by p/Under")


def test_requests_and_decisions_are_immutable() -> None:
    request = Request("iam:CreateInstanceProfile", PROFILE)
    decision = evaluate([("p", {"Statement": [allow()]})], request)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.action = "iam:DeleteInstanceProfile"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.allowed = False  # type: ignore[misc]
