"""The twin's images hold what Slinky's hold: no stage of SlinkyProject/containers' 25.11 Dockerfiles installs a
package with the device tools the twin hides (images.ABSENT_TOOLS), and the pyxis variants carry Dockerfile.pyxis's
entrypoint edits. If Slinky starts shipping one of those tools, the first test says so."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from scripts.twin import images
from tests.conftest import require_shared, unavailable

# Debian/Ubuntu packages that carry each tool (packages.ubuntu.com noble: libfabric-bin has fi_info;
# nvidia-utils-<n> has nvidia-smi; datacenter-gpu-manager has dcgmi; the Neuron apt repository's
# aws-neuronx-tools has neuron-ls, Neuron SDK setup guides).
PROVIDERS = {"fi_info": r"libfabric-bin|efa-installer", "neuron-ls": r"aws-neuronx-tools",
             "nvidia-smi": r"nvidia-utils-\d+|nvidia-driver-\d+|cuda-drivers",
             "dcgmi": r"datacenter-gpu-manager.*"}


def installed_packages(text: str) -> dict[str, set[str]]:
    """Stage -> the package names its `apt-get ... install` lines name."""
    joined = re.sub(r"\\\n", " ", text)
    found: dict[str, set[str]] = {}
    stage = ""
    for line in joined.splitlines():
        start = re.match(r"\s*FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE)
        if start:
            stage = start.group(1)
        if "apt-get" in line and " install" in line:
            words = line.split(" install", 1)[1].split()
            found.setdefault(stage, set()).update(w for w in words if not w.startswith(("-", "$", "./")))
    return found


def dockerfiles() -> list[Path]:
    context = require_shared("upstream/slinky-containers/schedmd/slurm/25.11/ubuntu24.04")
    return [context / "Dockerfile", context / "Dockerfile.pyxis"]


def test_no_stage_installs_a_hidden_tool() -> None:
    stages = {}
    for path in dockerfiles():
        stages.update({f"{path.name}:{k}": v for k, v in installed_packages(path.read_text()).items()})
    assert "Dockerfile:slurmd" in stages and "gawk" in stages["Dockerfile:slurmd"]  # the parser reads them
    assert "nvidia-container-toolkit" in stages["Dockerfile.pyxis:slurmd-pyxis"]
    for tool in images.ABSENT_TOOLS:
        carriers = {stage: sorted(p for p in packages if re.fullmatch(PROVIDERS[tool], p))
                    for stage, packages in stages.items()}
        assert not any(carriers.values()), (
            f"Slinky's images now install {tool} ({carriers}): drop it from images.ABSENT_TOOLS")


def test_the_parser_sees_a_provider() -> None:
    text = "FROM base AS slurmd\nRUN apt-get -qq -y install --no-install-recommends \\\n  gawk libfabric-bin\n"
    assert "libfabric-bin" in installed_packages(text)["slurmd"]


def test_pyxis_variants_carry_the_entrypoint_edits() -> None:
    edits = images.entrypoint_edits(dockerfiles()[1].read_text())
    for stage in ("slurmd-pyxis", "login-pyxis"):
        lines = [text for _n, text, path in edits[stage] if path == "/usr/local/bin/entrypoint.sh"]
        assert any(t.startswith("mount -t tmpfs tmpfs /tmp") for t in lines)
        assert any(t.startswith("mount -t proc none /proc") for t in lines)
    script = "#!/bin/bash\nset -e\nexec slurmd\n"
    for number, text, _path in edits["slurmd-pyxis"]:
        script = images.insert_line(script, number, text)
    assert script.splitlines()[1].startswith("mount -t tmpfs tmpfs /tmp") and script.endswith("exec slurmd\n")


def test_a_tool_of_this_machine_is_hidden_from_the_image(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        unavailable("an overlay whiteout is a character device: making one needs root")
    machine = tmp_path / "machine"
    (machine / "usr/bin").mkdir(parents=True)
    (machine / "usr/bin/fi_info").write_text("#!/bin/sh\n")
    layer = tmp_path / "layer"
    assert images.hide_absent_tools(layer, machine) == ["/usr/bin/fi_info"]
    mode = (layer / "usr/bin/fi_info").lstat()
    assert stat.S_ISCHR(mode.st_mode) and mode.st_rdev == os.makedev(0, 0)


@pytest.mark.parametrize(("reference", "stage"), [
    ("ghcr.io/slinkyproject/slurmd-pyxis:25.11.8-ubuntu24.04", "slurmd-pyxis"),
    ("ghcr.io/slinkyproject/slurmd:25.11.8-ubuntu24.04", "slurmd"),
    ("ghcr.io/slinkyproject/login-pyxis@sha256:00", "login-pyxis")])
def test_an_image_is_its_own_stage(reference: str, stage: str) -> None:
    assert images.stage_for_image(reference) == stage and images.base_stage(stage) == stage.split("-")[0]
