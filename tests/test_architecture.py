"""The layering the README's "Map of the tree" promises, read from the source: no import cycles, and no
import that crosses a line (function-level imports count too: they still make the cycle or the
dependency, only later)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("components", "scripts", "slurm", "jobs", "policy")
ENGINES = ("scripts.offline", "scripts.checks", "scripts.manifests", "scripts.preflight", "scripts.data",
           "scripts.advise", "scripts.k8s", "scripts.cost", "scripts.twin")


# Agent code components/ ships as source files in ConfigMaps: imported (not read by path) so the dependency shows.
SHIPPED_SOURCES = ("slurm.rest_client", "slurm.accounts", "slurm.health", "slurm.topology", "slurm.capacity",
                   "slurm.aws")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the imported module, resolved to a project module where it is one
    line: int


@dataclass
class Project:
    root: Path
    modules: dict[str, Path]
    imports: list[Import]

    def edges(self) -> dict[str, set[str]]:
        graph: dict[str, set[str]] = {m: set() for m in self.modules}
        for imp in self.imports:
            if imp.target in self.modules:
                graph[imp.source].add(imp.target)
        return graph

    def reachable(self, start: str) -> set[str]:
        """Every module imported from `start`, directly or through project modules (third-party included)."""
        by_source: dict[str, set[str]] = {}
        for imp in self.imports:
            by_source.setdefault(imp.source, set()).add(imp.target)
        seen: set[str] = set()
        todo = [start]
        while todo:
            for target in by_source.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    if target in self.modules:
                        todo.append(target)
        return seen


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_project(root: Path, packages: tuple[str, ...] = PACKAGES) -> Project:
    modules = {module_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))
               if ".venv" not in p.parts}
    if (root / "__main__.py").exists():
        modules["__main__"] = root / "__main__.py"
    imports = [imp for name, path in modules.items() for imp in _imports(name, path, modules)]
    return Project(root, modules, imports)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[Import]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..a import b
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield Import(name, sub if sub in modules else base, node.lineno)


def cycles(project: Project) -> list[list[str]]:
    """Strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    graph = project.edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names or module == "__future__"


def layering_violations(project: Project) -> list[str]:
    """Each crossing of the README's lines, as `file:line: what`."""
    found: list[str] = []

    def report(imp: Import, why: str) -> None:
        found.append(f"{project.modules[imp.source].relative_to(project.root)}:{imp.line}: "
                     f"{imp.source} imports {imp.target}: {why}")

    for imp in project.imports:
        if _under(imp.source, "components") and any(
                _under(imp.target, p) for p in ("scripts", "policy", "slurm", "jobs")) and not any(
                _under(imp.target, p) for p in SHIPPED_SOURCES):
            report(imp, "components/ builds resources and is used by the tools, never the other way")
        if _under(imp.source, "policy") and _under(imp.target, "scripts"):
            report(imp, "the policy pack runs inside `pulumi preview` without the CLI")
        if any(_under(imp.source, e) for e in ENGINES) and (
                _under(imp.target, "scripts.cli") or imp.target.split(".")[0] in ("typer", "rich")):
            report(imp, "engines return values and raise errors; only scripts/cli prints or exits")
        if _under(imp.source, "scripts.manifests") and imp.target.split(".")[0] in PACKAGES \
                and not _under(imp.target, "scripts.manifests"):
            report(imp, "the manifest validator stands alone")
    for program in PROGRAMS:
        found += [f"{program} imports {imp.target}: it runs by path with the machine's python3 (standard library "
                  "only)" for imp in project.imports if imp.source == program and not _stdlib(imp.target)]
        found += [f"{imp.source} imports {program}: it is a program, run by path" for imp in project.imports
                  if imp.target == program]
    for module in project.modules:
        if _under(module, "slurm"):
            for target in sorted(project.reachable(module)):
                if target.split(".")[0] in ("pulumi", "pulumi_aws", "pulumi_eks", "pulumi_kubernetes"):
                    found.append(f"{module} reaches {target}: the job client runs on the login pod without Pulumi")
    for module in project.modules:
        if _under(module, "slurm.accounts"):
            found += [f"{module} reaches {target}: the accounts reconcile runs on the login image's python3 "
                      "(standard library only)" for target in sorted(project.reachable(module))
                      if not (_stdlib(target) or _under(target, "slurm.accounts"))]
    lifecycle = ("slurm.health", "slurm.topology", "slurm.capacity", "slurm.aws")
    for module in project.modules:
        if any(_under(module, pkg) for pkg in lifecycle):
            found += [f"{module} reaches {target}: the node lifecycle controller runs on the login image's "
                      "python3 (standard library only)" for target in sorted(project.reachable(module))
                      if not (_stdlib(target) or any(_under(target, pkg) for pkg in lifecycle))]
    if "jobs.train" in project.modules:
        for target in sorted(project.reachable("jobs.train")):
            if not (_stdlib(target) or target.split(".")[0] == "torch" or _under(target, "jobs")
                    or (target.split(".")[0] == "torch_xla" and _xla_only(project, target))):
                found.append(f"jobs.train reaches {target}: the entry point runs in any PyTorch image "
                             "(torch and the standard library only; torch_xla only from jobs.training.xla)")
    return found


def _xla_only(project: Project, target: str) -> bool:
    """torch_xla is in the Neuron image only: jobs.training.xla alone may import it, and nothing imports that
    module at its top level (test_the_entry_point_imports_without_torch_xla runs the check for real)."""
    return all(imp.source == "jobs.training.xla" for imp in project.imports if imp.target == target)


# Programs inside an engine's package that run as processes of their own (by path, never imported): they end as
# programs do. scripts/twin/pod_init.py is a twin pod's first process; its forked children must os._exit.
PROGRAMS = ("scripts.twin.pod_init",)


def engine_exits(project: Project) -> list[str]:
    """print(), sys.exit() and exit() calls in the engines."""
    found = []
    for module, path in project.modules.items():
        if not any(_under(module, e) for e in ENGINES) or module in PROGRAMS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name in ("print", "exit", "quit", "sys.exit", "os._exit"):
                    found.append(f"{path.relative_to(project.root)}:{node.lineno}: {name}()")
    return found


@pytest.fixture(scope="module")
def repo() -> Project:
    return read_project(REPO)


def test_the_walk_sees_the_whole_project(repo: Project) -> None:
    # A walk that found nothing would pass every rule below.
    assert {"components.program", "scripts.cli.main", "slurm.client", "jobs.train", "policy.rules"} <= set(
        repo.modules)
    assert "torch" in repo.reachable("jobs.train") and "pulumi" in repo.reachable("components.program")


def test_no_import_cycles(repo: Project) -> None:
    assert cycles(repo) == []


def test_layering(repo: Project) -> None:
    assert layering_violations(repo) == []


def test_engines_neither_print_nor_exit(repo: Project) -> None:
    assert engine_exits(repo) == []


# The checks themselves, each shown to fire on a tree that breaks it.

def _tree(tmp_path: Path, files: dict[str, str]) -> Project:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return read_project(tmp_path)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    project = _tree(tmp_path, {
        "scripts/__init__.py": "", "scripts/cli/__init__.py": "",
        "scripts/cli/main.py": "from scripts.cli.policy import policy\n",
        "scripts/cli/policy.py": "def policy():\n    from scripts.cli import main\n",
    })
    assert cycles(project) == [["scripts.cli.main", "scripts.cli.policy"]]


def test_a_components_to_scripts_import_is_a_violation(tmp_path: Path) -> None:
    project = _tree(tmp_path, {
        "components/__init__.py": "", "components/aws/eks.py": "from scripts.offline import mocks\n",
        "scripts/__init__.py": "", "scripts/offline/__init__.py": "", "scripts/offline/mocks.py": "",
    })
    assert layering_violations(project) == [
        "components/aws/eks.py:1: components.aws.eks imports scripts.offline.mocks: components/ builds "
        "resources and is used by the tools, never the other way"]


def test_pulumi_reached_from_slurm_through_another_package_is_a_violation(tmp_path: Path) -> None:
    project = _tree(tmp_path, {
        "slurm/__init__.py": "", "slurm/client.py": "from components.config import cluster\n",
        "components/__init__.py": "", "components/config/cluster.py": "import pulumi\n",
    })
    assert layering_violations(project) == [
        "slurm.client reaches pulumi: the job client runs on the login pod without Pulumi"]


def test_a_third_party_import_in_the_entry_point_is_a_violation(tmp_path: Path) -> None:
    project = _tree(tmp_path, {
        "jobs/__init__.py": "", "jobs/train.py": "import os\nimport torch\nfrom jobs.training import data, xla\n",
        "jobs/training/__init__.py": "", "jobs/training/data.py": "import numpy\nimport torch_xla\n",
        "jobs/training/xla.py": "import torch_xla.runtime\n",
    })
    rule = "the entry point runs in any PyTorch image (torch and the standard library only; torch_xla only from " \
           "jobs.training.xla)"
    assert layering_violations(project) == [
        f"jobs.train reaches numpy: {rule}", f"jobs.train reaches torch_xla: {rule}"]


def test_an_engine_that_prints_or_imports_the_cli_is_a_violation(tmp_path: Path) -> None:
    project = _tree(tmp_path, {
        "scripts/__init__.py": "", "scripts/cli/__init__.py": "", "scripts/cli/main.py": "",
        "scripts/offline/__init__.py": "",
        "scripts/offline/plan.py": "import sys\nimport typer\nprint('x')\nsys.exit(1)\n",
        "scripts/manifests/__init__.py": "", "scripts/manifests/crd.py": "from components import catalog\n",
        "components/__init__.py": "", "components/compute/catalog.py": "",
    })
    assert sorted(v.split(": ", 2)[2] for v in layering_violations(project)) == [
        "engines return values and raise errors; only scripts/cli prints or exits",
        "the manifest validator stands alone"]
    assert engine_exits(project) == ["scripts/offline/plan.py:3: print()", "scripts/offline/plan.py:4: sys.exit()"]
