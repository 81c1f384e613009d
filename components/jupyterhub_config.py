"""`addons.jupyterhub`: JupyterHub (the zero-to-jupyterhub chart) with notebook profiles on `kubernetesPools`.
Without Pulumi, so the config can import it. Unset (the default) installs nothing."""

from __future__ import annotations

from components.config_base import Model


class JupyterHub(Model):
    """The hub, its proxy and one notebook server per user."""
