"""Preflight: ask the AWS account, read-only, whether a stack can be deployed before `pulumi up` tries.

Each check is a function `(session, config) -> Iterable[Finding]` in `scripts.preflight.checks`; this
module runs them. A check's findings are `error` (it fails: the deploy would), `warning` (it may) or `info`
(it passed: what the account says). An AWS API that refuses or does not implement a call turns that check
into a `warning` naming the reason, so one missing permission does not hide the other answers. Missing
credentials or an unreachable endpoint stop the run with `AwsUnavailable`: nothing can be checked without them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from components.config.cluster import ClusterConfig
from components.findings import Finding, errors

ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}

# One finding per thing checked: rule = the check (e.g. "vcpu-quota"), resource = what was checked (a partition's
# instance type, a quota, a bucket), message = what the account says, fix = how to put it right (none on a pass).
Check = Callable[[boto3.Session, ClusterConfig], Iterable[Finding]]


class AwsUnavailable(Exception):
    """No usable credentials, profile or endpoint: preflight cannot ask the account anything."""


@dataclass(frozen=True)
class Identity:
    account: str
    arn: str
    region: str


def open_session(region: str, profile: str | None = None) -> tuple[boto3.Session, Identity]:
    """A session from the standard credential chain, proven to work by one STS call."""
    try:
        session = boto3.Session(profile_name=profile, region_name=region)
        who = session.client("sts").get_caller_identity()
    except (BotoCoreError, ClientError) as exc:
        raise AwsUnavailable(f"cannot use AWS credentials{f' of profile {profile}' if profile else ''}: {exc}") \
            from None
    return session, Identity(who["Account"], who["Arn"], region)


def run_checks(session: boto3.Session, config: ClusterConfig, checks: dict[str, Check]) -> list[Finding]:
    results: list[Finding] = []
    for name, check in checks.items():
        try:
            for result in check(session, config):  # appended one by one: an error keeps earlier answers
                results.append(result)
        except ClientError as exc:
            results.append(_unanswered(name, exc))
        except BotoCoreError as exc:  # endpoint gone or credentials expired mid-run
            raise AwsUnavailable(f"{name}: {exc}") from None
    return results


def _unanswered(check: str, exc: ClientError) -> Finding:
    if exc.response.get("Error", {}).get("Code") in ACCESS_DENIED:
        fix = f"allow {exc.operation_name} to these credentials (docs/operating.md: Preflight, IAM permissions)"
    else:
        fix = "check this by hand in the AWS console, or rerun when the API answers"
    return Finding(rule=check, severity="warning", message=f"could not check: {exc}", fix=fix)


def failed(results: Iterable[Finding]) -> bool:
    return bool(errors(results))
