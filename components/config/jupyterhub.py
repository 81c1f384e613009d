"""`addons.jupyterhub`: JupyterHub (the zero-to-jupyterhub chart) with notebook profiles on `kubernetesPools`.
Without Pulumi, so the config can import it. Unset (the default) installs nothing.

Who may log in follows `slurm.identity` (components/config/teams.py): with `ldap`, the hub binds to the same directory
with ldapauthenticator's LDAPAuthenticator (the class z2jh 4.4.0 ships: images/hub/requirements.txt
jupyterhub-ldapauthenticator==2.0.2); declared `users` have SSH keys but no passwords, so the hub signs them in
through `oidc` (oauthenticator's GenericOAuthenticator, oauthenticator==17.4.0 there), mapping each person's stable
subject to their declared name (validators `jupyterhub-auth`, `jupyterhub-identity`). A notebook runs as its
person's own UID, which /shared trusts like Slurm does: who a person is must come from nothing they can edit.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from components.config.base import Cidr, Model

Slug = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=40)]
# k8s:<secret>/<key> in the jupyterhub namespace: handed to the hub as an environment variable, never a value.
SecretRef = Annotated[str, Field(pattern=r"^k8s:[a-z0-9][-a-z0-9.]*/[-._a-zA-Z0-9]+$")]
# Claims a person (or any admin of their account) can change at the provider: naming a person by one of these would
# let them rename themselves into another's UID. `sub` is "a locally unique and never reassigned identifier within
# the Issuer for the End-User" (OpenID Connect Core 1.0, section 2, ID Token); `oid` is Microsoft Entra ID's
# immutable object ID.
EDITABLE_CLAIMS = frozenset({"preferred_username", "email", "name", "nickname", "given_name", "family_name",
                             "username", "upn", "unique_name", "login"})


class Profile(Model):
    """One entry of the spawn form: `devices` GPUs or Neuron devices of a node of `pool` (a fraction of a node
    gets the same fraction of its CPU and memory)."""

    pool: str
    devices: int = Field(ge=1)
    display_name: str | None = None
    default: bool = False


class Oidc(Model):
    """An OpenID Connect provider (GenericOAuthenticator's traits, oauthenticator 17.4.0 generic.py/oauth2.py)."""

    authorize_url: str = Field(pattern=r"^https://\S+$")
    token_url: str = Field(pattern=r"^https://\S+$")
    userdata_url: str = Field(pattern=r"^https://\S+$")
    client_id: str = Field(min_length=1)
    client_secret: SecretRef  # read by oauthenticator from OAUTH_CLIENT_SECRET (oauth2.py _client_secret_default)
    # The claim that says who signed in: a stable one (`sub`), never one the person can edit (EDITABLE_CLAIMS).
    username_claim: str = "sub"
    # That claim's value of each person -> their declared name (slurm.identity.users): the one place the provider's
    # identity becomes a Slurm user and a UID on /shared. Anyone not listed is refused.
    users: dict[Annotated[str, Field(min_length=1)], str] = Field(default_factory=dict)
    # Only members of one of these groups (the userinfo claim `groupsClaim`) may sign in; empty: every listed person.
    allowed_groups: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    groups_claim: str = "groups"
    scope: list[str] = Field(default_factory=lambda: ["openid", "profile"])


class HubTls(Model):
    """TLS for the hub's address: the internal NLB terminates it with an ACM certificate (`certificateArn`), or the
    proxy does with a certificate of a kubernetes.io/tls Secret in namespace jupyterhub (`secret`, its name)."""

    certificate_arn: str | None = Field(None, pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[-a-f0-9]+$")
    secret: str | None = Field(None, pattern=r"^[a-z0-9][-a-z0-9.]*$")


class Exposure(Model):
    """How people reach the proxy: `internal` is an internal NLB admitting `allowedCidrs` (default: the VPC);
    `cluster` is a ClusterIP Service only (kubectl port-forward). Never the internet (validator)."""

    type: Literal["internal", "cluster"] = "internal"
    allowed_cidrs: list[Cidr] = Field(default_factory=list)
    # Required with `internal`: sign-ins and notebook traffic (tokens, code) never cross the VPC in plain HTTP.
    tls: HubTls | None = None


class JupyterHub(Model):
    """The hub, its proxy and one notebook server per user."""

    # The notebook image (name:tag, pinned); it needs python3 (the Slurm client, slurm/rest_client.py, is
    # standard library only and mounted into every notebook).
    image: str = Field(pattern=r"^[a-z0-9][-a-z0-9./_]*:[A-Za-z0-9_][-A-Za-z0-9_.]*$")
    profiles: dict[Slug, Profile] = Field(min_length=1)
    oidc: Oidc | None = None
    exposure: Exposure = Field(default_factory=Exposure)
