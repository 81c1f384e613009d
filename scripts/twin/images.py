"""The twin's stand-ins for Slinky's container images, built from Slinky's own image files.

An image here is one overlay layer over this machine's root (scripts/twin/pod_init.py), made from
SlinkyProject/containers' Dockerfile for Slurm 25.11 (a copy in ../shared/upstream/slinky-containers): each
stage's `COPY files/...` lines put the same entrypoint scripts and supervisor configs at the same paths, and its
ENTRYPOINT/CMD are what the pod runs. What the image installs from packages comes from this machine instead:
Debian's supervisor, socat, tini, gawk, OpenSSH and SSSD (the Makefile installs them), and Slurm 25.11 built
from source (tools/build_slurm.sh), linked into /usr/bin and /usr/sbin where the image's Debian packages put it.

Two things differ, on purpose, and each is written into the layer where it acts:
- `slurmd -C` answers the instance type's hardware from the catalog (components/catalog.py), and slurmd
  registers that hardware, because the twin's nodes run on this small machine (`hardware.py`);
- Slurm was built with its configuration directory in its own prefix, which the layer links to /etc/slurm,
  where the image's packages look.
Never copy the upstream files into the project: the layers are built at run time into the twin's state.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scripts.twin.errors import TwinError
from slurm.agent import contract

SLINKY_IMAGES = Path("upstream/slinky-containers/schedmd/slurm/25.11/ubuntu24.04")
PYXIS_SUFFIX = "-pyxis"
# Device tools no stage of Slinky's images installs (tests/twin/test_image_truth.py reads the Dockerfiles' package
# lists), hidden in the twin's images so a copy on this machine never shows through: the health check must work
# without them, as on EKS. nvidia-smi reaches a GPU container from the NVIDIA container toolkit (standin_table.py).
ABSENT_TOOLS = ("fi_info", "neuron-ls", "nvidia-smi", "dcgmi")
# Dockerfile.pyxis's entrypoint mounts a fresh /proc, where on EKS the host's NVIDIA driver shows its files: the
# twin's stand-in for them (standin_table.py "NVIDIA driver files", mounted at PROC_DRIVER_STANDIN by the pod) is
# bound back right after, the one line the twin adds to an image's entrypoint.
PROC_DRIVER_STANDIN = "/run/slurm-eks-twin/proc-driver"
PROC_REBIND = (f"if [ -d {PROC_DRIVER_STANDIN} ]; then mount --bind {PROC_DRIVER_STANDIN} /proc/driver; fi  "
               "# twin: the host driver's /proc files (scripts/twin/images.py)")
IMAGE_PATH = ("usr/local/sbin", "usr/local/bin", "usr/sbin", "usr/bin", "sbin", "bin")
# Daemons in the image's /usr/sbin, clients in /usr/bin (the slurm-smd Debian packages' layout).
SBIN = ("slurmctld", "slurmd", "slurmdbd", "slurmrestd", "sackd", "slurmstepd")
# What the Dockerfile's RUN steps leave that the entrypoints rely on (its `COPY`s are read from the file): the
# directories each stage makes, with their owner. slurmd: "mkdir -p /var/spool/slurmd/"; sackd (and login, built
# on it): "mkdir -p /run/slurm/" and "chown ${SLURM_USER}:${SLURM_USER} /run/slurm".
RUN_DIRECTORIES: dict[str, tuple[tuple[str, bool], ...]] = {
    "slurmd": (("var/spool/slurmd", False),),
    "sackd": (("run/slurm", True),),
    "login": (("run/slurm", True),),
}
# The slurm-eks agent image: its Dockerfile's last stage over Slinky's sackd stage (its SACKD_IMAGE), with the
# build context slurm/ (components/slinky/agent_image.py).
AGENT_STAGE = "slurm-eks-agent"
AGENT_CONTEXT = Path(__file__).resolve().parents[2] / "slurm"
AGENT_DOCKERFILE = AGENT_CONTEXT / "agent" / "Dockerfile"
AGENT_BASE_STAGE = "sackd"
# The images' SlurmUser, made in the Dockerfile's base stage (ARG SLURM_USER_UID=401, `useradd --system`), the
# same the operator names (slurm-operator v1.2.1 internal/builder/common/const.go SlurmUserUid).
SLURM_USER, SLURM_UID = "slurm", 401


@dataclass(frozen=True)
class ImageStage:
    """One stage of the Dockerfile: what it copies from files/ and what it runs."""

    name: str
    copies: tuple[tuple[tuple[str, ...], str], ...]  # (sources under the build context, destination)
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]


def _json_or_shell(text: str) -> tuple[str, ...]:
    text = text.strip()
    if text.startswith("["):
        return tuple(re.findall(r'"((?:[^"\\]|\\.)*)"', text))
    return ("/bin/sh", "-c", text)


def parse_dockerfile(text: str) -> dict[str, ImageStage]:
    """Stages by name: their COPY lines from the build context (not `--from=`), ENTRYPOINT and CMD, each stage
    inheriting its base stage's (`FROM base AS slurmd`)."""
    joined = re.sub(r"\\\n", " ", text)
    stages: dict[str, ImageStage] = {}
    current: dict | None = None
    for line in joined.splitlines():
        words = line.strip().split(None, 1)
        if not words:
            continue
        op, rest = words[0].upper(), (words[1] if len(words) > 1 else "")
        if op == "FROM":
            match = re.match(r"(\S+)\s+AS\s+(\S+)", rest, re.IGNORECASE)
            if current is not None:
                stages[current["name"]] = ImageStage(current["name"], tuple(current["copies"]),
                                                     current["entrypoint"], current["cmd"])
            base = stages.get(match.group(1)) if match else None
            current = {"name": match.group(2) if match else rest, "copies": list(base.copies) if base else [],
                       "entrypoint": base.entrypoint if base else (), "cmd": base.cmd if base else ()}
        elif current is None:
            continue
        elif op == "COPY" and "--from" not in rest:
            parts = shlex.split(rest)
            current["copies"].append((tuple(parts[:-1]), parts[-1]))
        elif op == "ENTRYPOINT":
            current["entrypoint"], current["cmd"] = _json_or_shell(rest), ()
        elif op == "CMD":
            current["cmd"] = _json_or_shell(rest)
    if current is not None:
        stages[current["name"]] = ImageStage(current["name"], tuple(current["copies"]), current["entrypoint"],
                                             current["cmd"])
    return stages


def stage_for_image(reference: str, labels: Mapping[str, str] | None = None) -> str:
    """`ghcr.io/slinkyproject/slurmd-pyxis:25.11.6-ubuntu24.04` -> `slurmd-pyxis`: the image's stage, a pyxis
    variant being Dockerfile.pyxis's stage over the plain one. The agent image, whose digest only `pulumi up`
    knows (unknown in the plan), is known by its pods' label (slurm/agent/contract.py)."""
    if labels is not None and contract.AGENT_POD_LABELS.items() <= labels.items():
        return AGENT_STAGE
    return reference.rsplit("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]


def base_stage(name: str) -> str:
    """The Dockerfile stage a pyxis variant builds on (`FROM .../slurmd:25.11-ubuntu24.04 AS slurmd-pyxis`)."""
    return name.removesuffix(PYXIS_SUFFIX)


def entrypoint_edits(text: str) -> dict[str, list[tuple[int, str, str]]]:
    """Dockerfile.pyxis's `sed -i 'Ni TEXT' FILE` lines, by stage: (line N, TEXT, FILE), in order. They put
    `mount -t proc none /proc` and `mount -t tmpfs tmpfs /tmp` at the top of the entrypoint."""
    edits: dict[str, list[tuple[int, str, str]]] = {}
    stage = ""
    for line in text.splitlines():
        found = re.match(r"\s*FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if found:
            stage = found.group(1)
            continue
        sed = re.match(r"\s*sed -i '(\d+)i (.*)' (\S+)\s*$", line)
        if sed and stage:
            edits.setdefault(stage, []).append((int(sed.group(1)), sed.group(2), sed.group(3)))
    return edits


def insert_line(text: str, number: int, line: str) -> str:
    """sed's `Ni TEXT`: TEXT becomes line `number`."""
    lines = text.splitlines(keepends=True)
    lines.insert(number - 1, line + "\n")
    return "".join(lines)


def _add_system_user(etc: Path, machine_etc: Path) -> None:
    """The image's /etc/passwd and /etc/group: the machine's, plus the image's `slurm` system user."""
    etc.mkdir(parents=True, exist_ok=True)
    for name, line in (("passwd", f"{SLURM_USER}:x:{SLURM_UID}:{SLURM_UID}::/nonexistent:/usr/sbin/nologin\n"),
                       ("group", f"{SLURM_USER}:x:{SLURM_UID}:\n")):
        lines = [entry for entry in (machine_etc / name).read_text().splitlines(keepends=True)
                 if entry.split(":", 1)[0] != SLURM_USER]
        (etc / name).write_text("".join(lines) + line)


def hide_absent_tools(layer: Path, machine_root: Path = Path("/")) -> list[str]:
    """An overlay whiteout (a 0/0 character device: Linux Documentation/filesystems/overlayfs.rst "whiteouts")
    in `layer` for each ABSENT_TOOLS program this machine has on the image's PATH; returns their paths."""
    hidden = []
    for directory in IMAGE_PATH:
        for tool in ABSENT_TOOLS:
            if (machine_root / directory / tool).exists() and not (layer / directory / tool).exists():
                (layer / directory).mkdir(parents=True, exist_ok=True)
                os.mknod(layer / directory / tool, 0o600 | stat.S_IFCHR, os.makedev(0, 0))
                hidden.append(f"/{directory}/{tool}")
    return hidden


class ImageBuilder:
    """Builds (once per twin) the layer of each stage the pods use."""

    def __init__(self, shared: Path, slurm_prefix: Path, root: Path, extra: dict[str, list[tuple[str, Path]]]):
        self.context = shared / SLINKY_IMAGES
        dockerfile = self.context / "Dockerfile"
        if not dockerfile.exists():
            raise TwinError(f"{dockerfile} is missing: the twin builds its images from SlinkyProject/containers' "
                            "files in ../shared/upstream (the repository's sibling directory)")
        self.stages = parse_dockerfile(dockerfile.read_text())
        # The agent's final stage (unnamed: the last FROM), its files from the agent's own build context.
        agent = list(parse_dockerfile(AGENT_DOCKERFILE.read_text()).values())[-1]
        self.stages[AGENT_STAGE] = ImageStage(AGENT_STAGE, agent.copies, agent.entrypoint, agent.cmd)
        pyxis = self.context / "Dockerfile.pyxis"
        self.edits = entrypoint_edits(pyxis.read_text()) if pyxis.exists() else {}
        self.prefix = slurm_prefix
        self.root = root
        # Files the twin adds per stage: (path in the image, file on this machine), e.g. the hardware shim.
        self.extra = extra

    def knows(self, name: str) -> bool:
        return name in self.stages or (name.endswith(PYXIS_SUFFIX) and name in self.edits)

    def stage(self, name: str) -> ImageStage:
        """A Dockerfile stage; a pyxis variant has its base stage's files, entrypoint and command."""
        base = base_stage(name) if name in self.edits else name
        if base not in self.stages:
            raise TwinError(f"no stage {name!r} in Slinky's Dockerfile (stages: {', '.join(self.stages)})")
        return self.stages[base]

    def layers(self, name: str) -> list[Path]:
        """The layers of stage `name`'s image, top first: the agent's over the sackd stage's."""
        if name == AGENT_STAGE:
            return [self.agent_layer(), self.layer(AGENT_BASE_STAGE)]
        return [self.layer(name)]

    def agent_layer(self) -> Path:
        """The agent Dockerfile's COPYs from slurm/, and for its `packages` stage (the hashed lock pip installs)
        a python3 that runs this repository's venv, where `make` installed the same lock."""
        layer = self.root / AGENT_STAGE
        if layer.exists():
            return layer
        partial = self.root / f".{AGENT_STAGE}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for sources, destination in self.stage(AGENT_STAGE).copies:
            for source in sources:
                src = AGENT_CONTEXT / source.rstrip("/")
                target = partial / destination.lstrip("/")
                if src.is_dir():
                    shutil.copytree(src, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                else:
                    target = target / src.name if destination.endswith("/") else target
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target)
        python = partial / "usr/local/bin/python3"
        python.parent.mkdir(parents=True, exist_ok=True)
        venv = AGENT_CONTEXT.parent / ".venv" / "bin" / "python3"
        python.write_text("#!/bin/sh\n# The agent image's python3 with its site packages (ENV PYTHONPATH): this "
                          f"repository's venv.\nPYTHONPATH=/opt/slurm-eks exec {venv} \"$@\"\n")
        python.chmod(0o755)
        (partial / "root").mkdir(mode=0o711, exist_ok=True)
        partial.rename(layer)
        return layer

    def layer(self, name: str) -> Path:
        """The layer directory of stage `name`, built on first use."""
        layer = self.root / name
        if layer.exists():
            return layer
        stage = self.stage(name)
        partial = self.root / f".{name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for sources, destination in stage.copies:
            for source in sources:
                src = self.context / source
                target = partial / destination.lstrip("/")
                if destination.endswith("/"):
                    target = target / src.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)
        for directory, names in (("usr/sbin", SBIN), ("usr/bin", None)):
            source_dir = self.prefix / ("sbin" if directory == "usr/sbin" else "bin")
            for program in sorted(source_dir.iterdir()):
                if names is None or program.name in names:
                    link = partial / directory / program.name
                    link.parent.mkdir(parents=True, exist_ok=True)
                    link.symlink_to(program)
        # The build's configuration directory is <prefix>/etc; the image's packages use /etc/slurm.
        conf = partial / str(self.prefix / "etc").lstrip("/")
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.symlink_to("/etc/slurm")
        (partial / "etc/slurm").mkdir(parents=True, exist_ok=True)
        _add_system_user(partial / "etc", Path("/etc"))
        for directory, slurm_owned in RUN_DIRECTORIES.get(base_stage(name), ()):
            (partial / directory).mkdir(parents=True, exist_ok=True)
            if slurm_owned:
                os.chown(partial / directory, SLURM_UID, SLURM_UID)
        # The machine's /root is private (0700) and holds its Python; the image's users must run it.
        (partial / "root").mkdir(mode=0o711, exist_ok=True)
        (partial / "root").chmod(0o711)
        edits = self.edits.get(name, [])
        for number, text, path in edits:  # Dockerfile.pyxis's entrypoint edits
            target = partial / path.lstrip("/")
            target.write_text(insert_line(target.read_text(), number, text))
        if any("mount -t proc" in text for _n, text, _p in edits):
            target = partial / edits[0][2].lstrip("/")
            target.write_text(insert_line(target.read_text(), 2 + len(edits), PROC_REBIND))
        hide_absent_tools(partial)
        for path, source in self.extra.get(name, []):
            target = partial / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            shutil.copy2(source, target)
        partial.rename(layer)
        return layer

    def command(self, name: str, args: list[str] | None = None, command: list[str] | None = None) -> list[str]:
        """What a container runs: its `command` or the image's ENTRYPOINT, then its `args` or the image's CMD
        (Kubernetes' rule, kubernetes.io/docs/tasks/inject-data-application/define-command-argument-container)."""
        stage = self.stage(name)
        entry = command if command else list(stage.entrypoint)
        return [*entry, *(args if args is not None and (args or command) else ([] if command else stage.cmd))]
