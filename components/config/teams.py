"""Who uses the cluster (`slurm.identity`, `slurm.accounts`, `slurm.qos`, `slurm.priority` in the stack):
the people and groups the login, compute and slurmrestd pods resolve, and the Slurm accounts, QoS and
fair-share weights `sacctmgr` is reconciled to after each `pulumi up`.

Types only; rules that relate several settings (unknown users, cycles, limits above capacity) are in
`components.config.rules.teams`. Field names follow what they become: sssd-ldap(5) for the directory, sacctmgr(1)
of Slurm 25.11 for accounts and QoS (SchedMD/slurm slurm-25-11-6-1 doc/man/man1/sacctmgr.1), slurm.conf(5)
for the priority weights.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from components.config.base import Model, SlurmTime

# Login names as useradd(8) takes them by default (NAME_REGEX), which are also valid Slurm user names.
_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
# Slurm account and QoS names: lower case (sacctmgr folds names to lower case unless told otherwise).
_SLURM_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
# `gres/gpu`, `cpu`, `mem`, `node`, `billing`, `gres/gpu:h100`: sacctmgr's TRES names.
_TRES = re.compile(r"^(cpu|mem|node|billing|energy|gres/[a-z0-9_]+(:[a-z0-9_]+)?|license/[a-z0-9_]+)$")


def _login_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError("not a login name; use lower-case letters, digits, '-' and '_' (at most 32), "
                         "starting with a letter")
    return value


def _slurm_name(value: str) -> str:
    if not _SLURM_NAME.match(value):
        raise ValueError("not a Slurm account or QoS name; use lower-case letters, digits, '-', '_' and '.'")
    return value


def _tres(value: dict[str, int]) -> dict[str, int]:
    bad = [name for name in value if not _TRES.match(name)]
    if bad:
        raise ValueError(f"unknown TRES {bad[0]!r}; use sacctmgr's names such as gres/gpu, cpu, mem or node")
    return value


LoginName = Annotated[str, AfterValidator(_login_name)]
SlurmName = Annotated[str, AfterValidator(_slurm_name)]
# TRES limits as sacctmgr writes them (`GrpTRES=gres/gpu=64,cpu=512`), one entry per TRES; mem in MiB.
Tres = Annotated[dict[str, Annotated[int, Field(ge=0)]], AfterValidator(_tres)]
# One value of an sssd.conf line: a line break would start another option.
OneLine = Annotated[str, Field(pattern=r"^[^\r\n]+$")]
# Where a secret value comes from: a key of a Kubernetes Secret in the `slurm` namespace, or an AWS Secrets
# Manager secret (its whole SecretString).
SecretSource = Annotated[str, Field(pattern=r"^(k8s:[a-z0-9][-a-z0-9.]*/[-._a-zA-Z0-9]+|arn:aws[a-z-]*:secretsmanager:"
                                            r"[a-z0-9-]+:\d{12}:secret:.+)$")]


class Person(Model):
    """A user served without a directory: the same name, UID and groups on every pod."""

    uid: int = Field(ge=1000, le=2**31 - 2)
    # Supplementary groups (names under `identity.groups`); the first is the primary group.
    groups: list[LoginName] = Field(min_length=1)
    ssh_keys: list[str] = Field(default_factory=list)
    shell: str = Field("/bin/bash", pattern=r"^/[^:\s]+$")  # an absolute path; no ':' (passwd's separator)


class Ldap(Model):
    """An LDAP or Active Directory server, read through SSSD's ldap provider (sssd-ldap(5))."""

    uri: str = Field(pattern=r"^ldaps?://[^\s,]+$")
    base_dn: OneLine = Field(alias="baseDN", min_length=3)
    bind_dn: OneLine | None = Field(None, alias="bindDN")
    bind_password: SecretSource | None = None
    # The CA that signed the server's certificate (PEM), from a Secret or Secrets Manager; unset: the
    # image's system CAs. Certificates are always verified (ldap_tls_reqcert = demand).
    ca_certificate: SecretSource | None = None
    # rfc2307 (posixAccount/posixGroup, OpenLDAP) or rfc2307bis / ad (memberOf groups, Active Directory).
    schema_: Literal["rfc2307", "rfc2307bis", "ad"] = Field("rfc2307", alias="schema")
    # Only members of these groups may log in (sssd's simple access provider); empty: every directory user.
    # simple_allow_groups is a comma-separated list, so a name holds no comma.
    allow_groups: list[Annotated[str, Field(pattern=r"^[^,\r\n]+$")]] = Field(default_factory=list)
    # Where those groups' entries live (e.g. ou=groups,dc=example,dc=org): JupyterHub's LDAPAuthenticator checks
    # membership by group DN, cn=<name>,<groupSearchBase> (validator jupyterhub-auth).
    group_search_base: OneLine | None = None

    @model_validator(mode="after")
    def _bind_pair(self) -> Ldap:
        if (self.bind_dn is None) != (self.bind_password is None):
            raise ValueError("bindDN and bindPassword go together: set both, or neither for anonymous binds")
        return self


class Identity(Model):
    """One source of users for login, compute and slurmrestd pods: `users` (declared here) or `ldap`."""

    users: dict[LoginName, Person] = Field(default_factory=dict)
    groups: dict[LoginName, Annotated[int, Field(ge=1000, le=2**31 - 2)]] = Field(default_factory=dict)
    ldap: Ldap | None = None
    # Home directories live on the shared file system: /shared/home/<user>.
    home_base: str = Field("/shared/home", pattern=r"^/shared(/[A-Za-z0-9._-]+)+$")

    @property
    def mode(self) -> Literal["users", "ldap", "none"]:
        return "ldap" if self.ldap else "users" if self.users else "none"


class Account(Model):
    """A Slurm account: a node of the fair-share tree (`parent` unset: under Slurm's `root`)."""

    parent: SlurmName | None = None
    description: str | None = None
    organization: str | None = None
    users: list[LoginName] = Field(default_factory=list)
    # Fair-share shares among its siblings (sacctmgr's Fairshare=).
    fairshare: int = Field(1, ge=1)
    # QoS the account's jobs may use; `default_qos` is what a job gets without --qos.
    qos: list[SlurmName] = Field(default_factory=list)
    default_qos: SlurmName | None = Field(None, alias="defaultQOS")
    # Association limits (sacctmgr GrpTRES/MaxTRES...), on top of the QoS limits.
    grp_tres: Tres = Field(default_factory=dict, alias="grpTRES")


class Qos(Model):
    """A Slurm QoS: job priority and limits (sacctmgr(1) "SPECIFICATIONS FOR QOS")."""

    description: str | None = None
    priority: int = Field(0, ge=0)
    grp_tres: Tres = Field(default_factory=dict, alias="grpTRES")
    max_tres_per_user: Tres = Field(default_factory=dict, alias="maxTRESPerUser")
    max_tres_per_job: Tres = Field(default_factory=dict, alias="maxTRESPerJob")
    max_jobs_per_user: int | None = Field(None, ge=0)
    max_submit_jobs_per_user: int | None = Field(None, ge=0)
    max_wall: SlurmTime | None = Field(None, alias="maxWall")


class PriorityWeights(Model):
    """slurm.conf PriorityWeight{Age,FairShare,JobSize,Partition,QOS}: a job's priority is the weighted sum
    of factors in [0, 1]. Slurm's defaults are 0 (factor off); ours make fair share lead and QoS next."""

    age: int = Field(1000, ge=0)
    fairshare: int = Field(10000, ge=0)
    job_size: int = Field(0, ge=0)
    partition: int = Field(0, ge=0)
    qos: int = Field(5000, ge=0)


class Priority(Model):
    """`PriorityType=priority/multifactor` with these weights once any account is declared."""

    weights: PriorityWeights = Field(default_factory=PriorityWeights)
    # How fast past usage stops counting against an account (PriorityDecayHalfLife, 25.11 default 7-0).
    decay_half_life: SlurmTime = "7-0"
    # Age factor saturates after this long pending (PriorityMaxAge, default 7-0).
    max_age: SlurmTime = "7-0"
