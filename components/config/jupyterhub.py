"""`addons.jupyterhub`: JupyterHub (the zero-to-jupyterhub chart) with notebook profiles on `kubernetesPools`.
Without Pulumi, so the config can import it. Unset (the default) installs nothing.

Who may log in follows `slurm.identity` (components/config/teams.py): with `ldap`, the hub binds to the same directory
with ldapauthenticator's LDAPAuthenticator (the class z2jh 4.4.0 ships: images/hub/requirements.txt
jupyterhub-ldapauthenticator==2.0.2); declared `users` have SSH keys but no passwords, so the hub signs them in
through `oidc` (oauthenticator's GenericOAuthenticator, oauthenticator==17.4.0 there) and admits only the
declared names (validator `jupyterhub-auth`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from components.config.base import Cidr, Model

Slug = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=40)]
# k8s:<secret>/<key> in the jupyterhub namespace: handed to the hub as an environment variable, never a value.
SecretRef = Annotated[str, Field(pattern=r"^k8s:[a-z0-9][-a-z0-9.]*/[-._a-zA-Z0-9]+$")]


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
    username_claim: str = "preferred_username"  # must yield the Slurm user name
    scope: list[str] = Field(default_factory=lambda: ["openid", "profile"])


class Exposure(Model):
    """How people reach the proxy: `internal` is an internal NLB admitting `allowedCidrs` (default: the VPC);
    `cluster` is a ClusterIP Service only (kubectl port-forward). Never the internet (validator)."""

    type: Literal["internal", "cluster"] = "internal"
    allowed_cidrs: list[Cidr] = Field(default_factory=list)


class JupyterHub(Model):
    """The hub, its proxy and one notebook server per user."""

    # The notebook image (name:tag, pinned); it needs python3 (the Slurm client, slurm/rest_client.py, is
    # standard library only and mounted into every notebook).
    image: str = Field(pattern=r"^[a-z0-9][-a-z0-9./_]*:[A-Za-z0-9_][-A-Za-z0-9_.]*$")
    profiles: dict[Slug, Profile] = Field(min_length=1)
    oidc: Oidc | None = None
    exposure: Exposure = Field(default_factory=Exposure)
