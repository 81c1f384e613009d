"""Rules on the add-ons: JupyterHub's profiles, authentication and exposure; gitops' repository."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.gitops import HTTPS_URL, SSH_URL
from components.config.jupyterhub import EDITABLE_CLAIMS
from components.config.rules.registry import Found, known_types, rule
from components.names import WORLD_CIDRS


@rule("jupyterhub-profiles")
def jupyterhub_profiles(c: ClusterConfig) -> Iterator[Found]:
    """Each notebook profile runs on a Kubernetes pool whose nodes have the devices it asks for."""
    hub = c.addons.jupyterhub
    for slug, profile in (hub.profiles.items() if hub else ()):
        where = f"addons.jupyterhub.profiles.{slug}"
        pool = c.kubernetes_pools.get(profile.pool)
        if pool is None:
            yield Found(f"{where}.pool", profile.pool, "not a Kubernetes pool: notebooks never run on Slurm's "
                        "partitions", f"use one of kubernetesPools ({', '.join(c.kubernetes_pools) or 'none'})")
            continue
        types = known_types(pool)
        if not types:
            continue  # instance-type-known reports it
        node = types[0]
        if node.accelerator == "none" or profile.devices > node.accelerators:
            have = f"{node.accelerators} {node.accelerator_model}" if node.accelerators else "no accelerator"
            yield Found(f"{where}.devices", profile.devices, f"pool {profile.pool}'s {node.name} has {have} "
                        "per node: the notebook would never be scheduled",
                        f"ask for 1 to {node.accelerators} devices, or pick a pool with more"
                        if node.accelerators else "pick a GPU or Trainium pool")
    if hub and sum(p.default for p in hub.profiles.values()) > 1:
        yield Found("addons.jupyterhub.profiles", [s for s, p in hub.profiles.items() if p.default],
                    "more than one profile is the default", "mark one profile `default: true`")


@rule("jupyterhub-auth")
def jupyterhub_auth(c: ClusterConfig) -> Iterator[Found]:
    """The hub authenticates against the stack's identity source: the directory (LDAP), or an OIDC provider
    for declared people, who have no passwords."""
    hub = c.addons.jupyterhub
    if hub is None:
        return
    mode = c.slurm.identity.mode
    if mode != "ldap" and hub.oidc is None:
        who = "declared users" if mode == "users" else "no people"
        yield Found("addons.jupyterhub.oidc", None, f"slurm.identity has {who} and no passwords: nobody could "
                    "sign in to the hub",
                    "add addons.jupyterhub.oidc (your identity provider), whose usernames are the Slurm names")
    if mode == "ldap" and hub.oidc is not None:
        yield Found("addons.jupyterhub.oidc", "set", "slurm.identity.ldap is the identity source: the hub binds "
                    "to it", "remove addons.jupyterhub.oidc")
    ldap = c.slurm.identity.ldap
    if mode == "ldap" and ldap and ldap.bind_password and not ldap.bind_password.startswith("k8s:"):
        yield Found("slurm.identity.ldap.bindPassword", ldap.bind_password, "the hub reads its bind password "
                    "from a Kubernetes Secret only",
                    "use k8s:<secret>/<key> (the Secret in namespace jupyterhub too)")
    if mode == "ldap" and ldap and ldap.allow_groups and not ldap.group_search_base:
        # sssd admits by group name (simple_allow_groups); ldapauthenticator 2.0.2's allowed_groups takes group DNs:
        # without the groups' base the hub could not check them and would admit every directory user.
        yield Found("slurm.identity.ldap.groupSearchBase", None, "Slurm logins are limited to allowGroups, but the "
                    "hub checks groups by DN and cannot name them: every directory user could start a notebook",
                    "set groupSearchBase to the DN the groups live under (the hub checks cn=<group>,<that DN>)")
    if mode == "ldap" and ldap and ldap.ca_certificate and not ldap.ca_certificate.startswith("k8s:"):
        yield Found("slurm.identity.ldap.caCertificate", ldap.ca_certificate, "the hub verifies the directory's "
                    "certificate with a CA it reads from a Kubernetes Secret only",
                    "use k8s:<secret>/<key> (the Secret in namespace jupyterhub too)")


@rule("jupyterhub-identity")
def jupyterhub_identity(c: ClusterConfig) -> Iterator[Found]:
    """Who signed in becomes a UID on /shared: the provider's claim must be one nobody can edit, and each value must
    map to exactly one declared person."""
    hub = c.addons.jupyterhub
    oidc = hub.oidc if hub else None
    if oidc is None:
        return
    if oidc.username_claim in EDITABLE_CLAIMS:
        yield Found("addons.jupyterhub.oidc.usernameClaim", oidc.username_claim, "a claim people can change at "
                    "the provider: whoever renames themselves to another's name would get their UID on /shared",
                    'use "sub" (never reassigned within the provider) and map each subject under oidc.users')
    if not oidc.users:
        yield Found("addons.jupyterhub.oidc.users", {}, "no subject is mapped to a declared person: nobody could "
                    "sign in", "add <subject>: <slurm.identity.users name> for each person")
    for subject, person in oidc.users.items():
        if person not in c.slurm.identity.users:
            yield Found(f"addons.jupyterhub.oidc.users.{subject}", person, "not a person slurm.identity.users "
                        "declares: the notebook would have no UID", f"use one of {', '.join(c.slurm.identity.users)}")
    twice = sorted({p for p in oidc.users.values() if list(oidc.users.values()).count(p) > 1})
    if twice:
        yield Found("addons.jupyterhub.oidc.users", twice, "one person mapped from two subjects: either account "
                    "would act as them", "keep one subject per person")


@rule("jupyterhub-exposure")
def jupyterhub_exposure(c: ClusterConfig) -> Iterator[Found]:
    hub = c.addons.jupyterhub
    for i, cidr in enumerate(hub.exposure.allowed_cidrs if hub else ()):  # CIDRs already (config_base.Cidr)
        net = ipaddress.ip_network(cidr)
        if str(net) in WORLD_CIDRS or net.prefixlen < 8:
            yield Found(f"addons.jupyterhub.exposure.allowedCidrs[{i}]", cidr, "the hub is never exposed to the "
                        "internet", "list your office or VPN ranges")
    if hub and hub.exposure.type == "internal":
        tls = hub.exposure.tls
        if tls is None:
            yield Found("addons.jupyterhub.exposure.tls", None, "an internal NLB in plain HTTP carries sign-ins, "
                        "tokens and notebook code across the VPC",
                        "set tls.certificateArn (an ACM certificate the NLB serves) or tls.secret (a "
                        "kubernetes.io/tls Secret in namespace jupyterhub), or use exposure.type: cluster")
        elif (tls.certificate_arn is None) == (tls.secret is None):
            yield Found("addons.jupyterhub.exposure.tls", tls.model_dump(by_alias=True, exclude_none=True),
                        "TLS ends in one place: the NLB (certificateArn) or the proxy (secret), exactly one of them",
                        "keep one of tls.certificateArn and tls.secret")


@rule("gitops-repo")
def gitops_repo(c: ClusterConfig) -> Iterator[Found]:
    g = c.gitops
    if g is None:
        return
    if not (HTTPS_URL.match(g.repo_url) or SSH_URL.match(g.repo_url)):
        yield Found("gitops.repoURL", g.repo_url, "Argo CD clones over HTTPS or SSH only (no http://, file:// "
                    "or local paths)", "https://git.example.com/org/repo.git or git@git.example.com:org/repo.git")
    if g.path.startswith("/") or ".." in g.path.split("/"):
        yield Found("gitops.path", g.path, "a path inside the repository", "e.g. clusters/prod (no leading "
                    "/ and no ..)")
    if not g.target_revision.strip() or any(ch.isspace() for ch in g.target_revision):
        yield Found("gitops.targetRevision", g.target_revision, "not a branch, tag or commit", "e.g. main")
