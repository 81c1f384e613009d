"""`gitops`: Argo CD applies the charts from a Git repository (the tree `slurm-eks gitops export` writes)
instead of Pulumi installing them. Without Pulumi, so the config can import it. Unset (the default): Pulumi
installs everything.

The fields are the root Application's `spec.source` (argoproj/argo-cd v3.5.1 manifests/crds/
application-crd.yaml: repoURL, targetRevision, path)."""

from __future__ import annotations

import re

from pydantic import Field

from components.config.base import Model

# The URL forms Argo CD's repo server clones (argo-cd v3.5.1 docs/user-guide/private-repositories.md: HTTPS,
# and SSH as ssh://user@host/path or the scp-like user@host:path).
HTTPS_URL = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?/\S+$")
SSH_URL = re.compile(r"^(ssh://[\w.-]+@[A-Za-z0-9.-]+(:\d+)?/\S+|[\w.-]+@[A-Za-z0-9.-]+:\S+)$")
APPS_DIR = "apps"  # under `path`: the Applications the root Application syncs


class GitOps(Model):
    """Where Argo CD reads the exported tree."""

    # https://git.example.com/org/repo.git or git@git.example.com:org/repo.git; Argo CD's spelling, repoURL.
    repo_url: str = Field(alias="repoURL")
    # A branch, tag or commit; Argo CD's default (omitted) is HEAD.
    target_revision: str = "HEAD"
    path: str = "."  # the directory `gitops export` wrote, relative to the repository root

    @property
    def apps_path(self) -> str:
        return APPS_DIR if self.path.strip("/") in ("", ".") else f"{self.path.strip('/')}/{APPS_DIR}"

    @property
    def git_host(self) -> str | None:
        """The host the repo server clones from (for its NetworkPolicy and the docs)."""
        found = re.match(r"^(?:https://|ssh://)?(?:[\w.-]+@)?([A-Za-z0-9.-]+)", self.repo_url)
        return found.group(1) if found else None

    @property
    def uses_ssh(self) -> bool:
        return not self.repo_url.startswith("https://")
