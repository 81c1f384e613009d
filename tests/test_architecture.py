"""The layering the README's "Map of the tree" promises: import-linter contracts in pyproject.toml's
`[tool.importlinter]` (custom types in tests/architecture/contracts.py), run over the real tree, and each one shown
broken on a throw-away tree that breaks it (the same contract, read from pyproject.toml). Engines neither print
nor exit: not an import rule, so a small AST walk here."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from tests.conftest import REPO, require_module, require_tool

CONFIG: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
CONTRACTS: dict[str, dict[str, Any]] = {c["id"]: c for c in CONFIG["contracts"]}
ROOTS: list[str] = CONFIG["root_packages"]
# The engines and the programs inside them, as their contracts name them.
ENGINES: list[str] = CONTRACTS["engines"]["source_modules"]
PROGRAMS: list[str] = CONTRACTS["programs"]["source_modules"]


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`lint-imports` in `cwd` (its root packages are found there; tests.architecture.contracts in this repo)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}
    return subprocess.run([require_tool("lint-imports", "the dev extra: make setup-extras"), "--no-cache",
                           "--no-logo", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_contracts_hold() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


def test_the_graph_is_the_whole_project() -> None:
    # A graph that missed modules would keep every contract: every .py file under the root packages is in it (a
    # directory without __init__.py would not be), and the third-party imports the contracts rest on are seen.
    grimp = require_module("grimp", "the dev extra (import-linter's graph): make setup-extras")
    graph = grimp.build_graph(*ROOTS, include_external_packages=True, cache_dir=None)
    files = {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
             for root in ROOTS for p in (REPO / root).rglob("*.py")}
    assert {m for m in graph.modules if m.split(".")[0] in ROOTS} == files
    assert "torch" in graph.find_upstream_modules("jobs.train", as_package=True)
    assert "pulumi" in graph.find_upstream_modules("components.program")


def test_every_contract_is_shown_broken() -> None:
    # Each contract has a test below that breaks it on a throw-away tree.
    assert set(re.findall(r'broken\(tmp_path, "([^"]+)"', Path(__file__).read_text())) == set(CONTRACTS)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a JSON string is a TOML basic string


def broken(tmp_path: Path, contract_id: str, files: dict[str, str]) -> str:
    """Lint a throw-away tree of `files` with pyproject.toml's contract `contract_id` alone and return the report of
    the broken contract (failing if it was kept). The tree gets every root package and every module the contract
    names (import-linter refuses a contract naming a module that is not there); an `ignore_imports` line that
    matches nothing in so small a tree is not an error here."""
    for name, text in files.items():
        _write(tmp_path, name, text)
    contract = CONTRACTS[contract_id]
    named = [m for key in ("source_modules", "forbidden_modules", "allowed_modules", "protected_modules",
                           "allowed_importers", "ancestors", "packages") for m in contract.get(key, [])]
    for module in [*ROOTS, *named]:
        path = Path(*module.split("."))
        if module.split(".")[0] in ROOTS and "*" not in module and not any(
                (tmp_path / p).exists() for p in (path.with_suffix(".py"), path / "__init__.py")):
            _write(tmp_path, str(path / "__init__.py"), "")
    contract = {**contract, **({"unmatched_ignore_imports_alerting": "none"} if "ignore_imports" in contract else {})}
    session = {k: v for k, v in CONFIG.items() if k != "contracts"}
    (tmp_path / "pyproject.toml").write_text(
        "[tool.importlinter]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in session.items())
        + "\n[[tool.importlinter.contracts]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in contract.items()))
    result = lint_imports(tmp_path, "--contract", contract_id)
    assert result.returncode == 1 and f"{contract['name']} BROKEN" in result.stdout, result.stdout + result.stderr
    return result.stdout.partition("Broken contracts")[2]


def _write(root: Path, name: str, text: str) -> None:
    """Write the module `name` (a path under `root`), making each directory above it a package."""
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    for package in path.relative_to(root).parents[:-1]:
        if not (root / package / "__init__.py").exists():
            (root / package / "__init__.py").write_text("")
    path.write_text(text)


def test_components_importing_a_tool_or_an_unshipped_slurm_module_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "components", {
        "components/aws/eks.py": "from scripts.offline import mocks\nimport slurm.agent.health\n"
                                 "from slurm import client\nfrom slurm.agent import contract\n",
        "scripts/offline/mocks.py": "", "slurm/client.py": "", "slurm/agent/health/__init__.py": "",
        "slurm/agent/contract.py": "",
    })
    assert "components.aws.eks -> scripts.offline.mocks (l.1)" in report
    assert "components.aws.eks -> slurm.client (l.3)" in report
    # The agents run in their image: components/ may name their contract, never their code.
    assert "components.aws.eks -> slurm.agent.health (l.2)" in report
    assert "slurm.agent.contract" not in report


def test_the_policy_pack_importing_the_cli_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "policy", {"policy/rules.py": "from scripts.cli import main\n",
                                         "scripts/cli/main.py": ""})
    assert "policy.rules -> scripts.cli.main" in report


def test_an_engine_importing_the_cli_or_typer_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "engines", {
        "scripts/offline/plan.py": "import typer\n",
        "scripts/cost/estimate.py": "from scripts.cli import main\n", "scripts/cli/main.py": "",
    })
    assert "scripts.offline.plan -> typer" in report and "scripts.cost.estimate -> scripts.cli.main" in report


def test_the_manifest_validator_importing_the_project_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "manifests", {
        "scripts/manifests/crd_schema.py": "from components import catalog\nfrom scripts.checks import x\n",
        "components/catalog.py": "", "scripts/checks/x.py": "",
    })
    assert "scripts.manifests.crd_schema -> components.catalog" in report
    assert "scripts.manifests.crd_schema -> scripts.checks.x" in report


def test_pulumi_reached_from_slurm_through_another_package_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "slurm", {
        "slurm/client.py": "from components.config import cluster\n",
        "components/config/cluster.py": "import pulumi\n",
    })
    assert "slurm.client -> components.config.cluster (l.1)" in report and "-> pulumi (l.1)" in report


def test_a_third_party_module_reached_from_the_accounts_reconcile_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "accounts", {
        "slurm/agent/accounts/plan.py": "import json\nfrom slurm import jobinfo\n", "slurm/jobinfo.py": "import yaml\n",
    })
    assert "slurm.agent.accounts reaches slurm.jobinfo (slurm.agent.accounts.plan -> slurm.jobinfo)" in report
    assert "slurm.agent.accounts reaches yaml (slurm.agent.accounts.plan -> slurm.jobinfo -> yaml)" in report
    assert "reaches json" not in report


def test_the_lifecycle_packages_reaching_outside_themselves_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "lifecycle", {
        "slurm/agent/health/__main__.py": "from slurm.agent.topology import sync\n",  # one another: allowed
        "slurm/agent/topology/sync.py": "import botocore\nimport requests\n",  # botocore (EC2): allowed
        "slurm/agent/capacity/blocks.py": "from slurm.agent import aws\nfrom slurm.client import Client\n",
        "slurm/client.py": "", "slurm/agent/aws.py": "import boto3\nimport yaml\n",
        # the agent's clients: allowed
        "slurm/agent/health/controller.py": "from slurm.agent import kube, metrics\n",
        "slurm/agent/kube.py": "import kubernetes\nimport urllib3\n",
        "slurm/agent/metrics.py": "import prometheus_client\n",
    })
    assert "reaches kubernetes" not in report and "reaches prometheus_client" not in report
    assert "slurm.agent.topology reaches requests (slurm.agent.topology.sync -> requests)" in report
    assert "slurm.agent.health reaches requests (slurm.agent.health.__main__ -> slurm.agent.topology.sync -> " \
        "requests)" in report
    assert "slurm.agent.capacity reaches slurm.client" in report
    # slurm.agent (the agents' shared modules) is allowed, but not what it reaches beyond boto3
    assert "slurm.agent.capacity reaches yaml (slurm.agent.capacity.blocks -> slurm.agent.aws -> yaml)" in report
    assert "reaches boto3" not in report and "reaches botocore" not in report and "reaches slurm.agent" not in report


def test_the_contract_reaching_a_client_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "agent-contract", {
        "slurm/agent/contract.py": "import json\nfrom slurm.agent import kube\n",
        "slurm/agent/kube.py": "import kubernetes\n"})
    assert "slurm.agent.contract reaches kubernetes (slurm.agent.contract -> slurm.agent.kube -> kubernetes)" in report
    assert "reaches json" not in report


def test_the_agent_package_reaching_beyond_its_lock_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "agent", {
        "slurm/agent/kube.py": "import kubernetes\nimport urllib3\n", "slurm/agent/aws.py": "import boto3\n",
        "slurm/agent/metrics.py": "import prometheus_client\n",
        "slurm/agent/health/__init__.py": "from slurm import jobinfo\n", "slurm/jobinfo.py": "import yaml\n",
        "slurm/agent/accounts/__init__.py": "import pulumi\n",
    })
    assert "slurm.agent reaches slurm.jobinfo" in report and "slurm.agent reaches yaml" in report
    assert "slurm.agent reaches pulumi (slurm.agent.accounts -> pulumi)" in report
    assert not re.search(r"reaches (kubernetes|urllib3|boto3|prometheus_client)\b", report)


def test_pulumi_reached_from_the_stack_config_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "config", {
        "components/config/cluster.py": "import pydantic\nfrom components.compute import catalog, nodepools\n",
        "components/catalog.py": "", "components/compute/nodepools.py": "import pulumi_aws\n",
    })
    assert "components.config.cluster -> components.compute.nodepools (l.2)" in report
    assert "components.compute.nodepools -> pulumi_aws (l.1)" in report


def test_a_third_party_import_reached_from_the_entry_point_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "train", {
        "jobs/train.py": "import os\nimport torch\nfrom jobs.training import data, xla\n",
        "jobs/training/data.py": "import numpy\n", "jobs/training/xla.py": "import torch_xla.runtime\n",
    })
    assert "jobs.train reaches numpy (jobs.train -> jobs.training.data -> numpy)" in report
    assert "reaches torch" not in report


def test_torch_reached_from_the_checkpoint_store_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "checkpoint-store", {
        "jobs/checkpoint_store/__init__.py": "", "jobs/checkpoint_layout.py": "import re\n",
        "jobs/checkpoint_store/store.py": "import boto3\nimport zstandard\nfrom jobs import checkpoint_layout\n"
                                          "from jobs.training import checkpoint\n",
        "jobs/training/checkpoint.py": "import torch\n",
    })
    assert "jobs.checkpoint_store reaches jobs.training.checkpoint" in report
    assert "reaches boto3" not in report and "reaches zstandard" not in report


def test_torch_xla_imported_outside_the_xla_module_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "torch-xla", {
        "jobs/training/xla.py": "import torch_xla\n", "jobs/training/data.py": "import torch_xla\n",
    })
    assert "jobs.training.data -> torch_xla" in report and "jobs.training.xla ->" not in report


def test_torchtitan_imported_outside_its_recipe_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "torchtitan", {
        "jobs/recipes/titan.py": "import torchtitan.config\n", "jobs/recipes/hf_finetune.py": "import torchtitan\n",
    })
    assert "jobs.recipes.hf_finetune -> torchtitan" in report and "jobs.recipes.titan ->" not in report


def test_a_program_importing_beyond_the_standard_library_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "programs", {"scripts/twin/pod_init.py": "import os\nfrom scripts.twin import plan\n",
                                           "scripts/twin/plan.py": ""})
    assert "scripts.twin.pod_init reaches scripts.twin.plan" in report


def test_a_program_imported_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "programs-run-by-path", {
        "scripts/twin/pod_init.py": "", "scripts/twin/plan.py": "from scripts.twin import pod_init\n",
    })
    assert "scripts.twin.plan -> scripts.twin.pod_init" in report


def test_a_cycle_through_a_function_level_import_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "cycles", {
        "scripts/cli/main.py": "from scripts.cli.policy import policy\n",
        "scripts/cli/policy.py": "def policy():\n    from scripts.cli import main\n",
    })
    assert "Cycle: scripts.cli.main, scripts.cli.policy" in report


def test_a_loop_between_root_packages_is_broken(tmp_path: Path) -> None:
    report = broken(tmp_path, "cycles", {
        "components/a.py": "import slurm.b\n", "slurm/b.py": "", "slurm/c.py": "import components.d\n",
        "components/d.py": "",
    })
    assert "Loop between root packages" in report and "Cycle:" not in report


def test_a_loop_between_sibling_packages_is_broken(tmp_path: Path) -> None:
    # What slurm/health and slurm/topology had: no module cycle, a package loop.
    report = broken(tmp_path, "loops", {
        "slurm/agent/health/__main__.py": "from slurm.agent.topology.sync import topology_pass\n",
        "slurm/agent/topology/sync.py": "from slurm.agent.health.kube import Kube\n", "slurm/agent/health/kube.py": "",
    })
    assert "No cycles are allowed in slurm." in report
    assert "- .health -> .topology" in report or "- .topology -> .health" in report


def test_components_importing_upward_or_across_a_layer_is_broken(tmp_path: Path) -> None:
    layers = [tail.strip() for line in CONTRACTS["components-layers"]["layers"] for tail in line.split("|")]
    files = {f"components/{tail}/__init__.py": "" for tail in layers}
    files["components/config/rules.py"] = "from components.slinky import images\n"  # config reading Slinky: upward
    files["components/slinky/images.py"] = ""
    files["components/compute/nodes.py"] = "import components.storage.fsx\n"  # compute and storage are one layer
    files["components/storage/fsx.py"] = ""
    report = broken(tmp_path, "components-layers", files)
    assert "components.config.rules -> components.slinky.images (l.1)" in report
    assert "components.compute.nodes -> components.storage.fsx (l.1)" in report

# Engines return values and raise errors; only scripts/cli prints or exits (programs inside them end as programs do).

def engine_exits(root: Path) -> list[str]:
    """print(), sys.exit() and exit() calls in the engines under `root`."""
    found = []
    for engine in ENGINES:
        for path in sorted(root.joinpath(*engine.split(".")).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts)
            if module in PROGRAMS:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and (name := ast.unparse(node.func)) in (
                        "print", "exit", "quit", "sys.exit", "os._exit"):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {name}()")
    return found


def test_engines_neither_print_nor_exit() -> None:
    assert engine_exits(REPO) == []


def test_an_engine_that_prints_or_exits_is_found(tmp_path: Path) -> None:
    _write(tmp_path, "scripts/offline/plan.py", "import sys\nprint('x')\nsys.exit(1)\n")
    _write(tmp_path, "scripts/twin/pod_init.py", "import os\nos._exit(0)\n")
    assert engine_exits(tmp_path) == ["scripts/offline/plan.py:2: print()", "scripts/offline/plan.py:3: sys.exit()"]
