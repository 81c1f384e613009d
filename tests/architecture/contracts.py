"""Two import-linter contract types that its built-in ones do not express, registered in pyproject.toml's
`[tool.importlinter] contract_types`; `lint-imports` (`make lint`) and tests/test_architecture.py run them.

- `reaches_only`: everything the source modules import, directly or through other modules, is in the standard
  library or under `allowed_modules` (code that runs on a python3 or in an image with nothing else installed).
- `acyclic`: no import cycle between any two modules (a function-level import counts: it still makes the cycle,
  only later), and none between the `packages` taken as units (the root packages: import-linter's
  `acyclic_siblings` covers the packages inside each).
"""

from __future__ import annotations

import sys

import grimp
from importlinter import Contract, ContractCheck, fields, output


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


class ReachesOnlyContract(Contract):
    """source_modules (packages: their descendants too) reach nothing but the standard library and allowed_modules
    (a project module and its descendants, or a top-level external package such as `torch`)."""

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.ModuleField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        sources = [m.name for m in self.source_modules]  # type: ignore[attr-defined]
        allowed = sources + [m.name for m in self.allowed_modules or []]  # type: ignore[attr-defined]
        reached: list[tuple[str, tuple[str, ...]]] = []  # (source module, a chain from it)
        for source in sources:
            if source not in graph.modules:
                raise ValueError(f"Module '{source}' does not exist.")
            for target in sorted(graph.find_upstream_modules(source, as_package=True)):
                if not (_stdlib(target) or any(_under(target, a) for a in allowed)):
                    chain = graph.find_shortest_chain(importer=source, imported=target, as_packages=True)
                    reached.append((source, chain or (source, target)))
        return ContractCheck(kept=not reached, metadata={"reached": reached})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for source, chain in check.metadata["reached"]:
            output.print_error(f"{source} reaches {chain[-1]} ({' -> '.join(chain)})", bold=False)


class AcyclicContract(Contract):
    """No cycle between modules of the root packages, and no loop between `packages` taken as units."""

    packages = fields.ListField(subfield=fields.ModuleField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots = self.session_options["root_packages"]
        internal = sorted(m for m in graph.modules if any(_under(m, r) for r in roots))
        cycles: list[list[str]] = []
        seen: set[str] = set()
        for module in internal:
            if module in seen:
                continue
            # A module's strongly connected component: what it reaches that reaches it back.
            component = {module} | (graph.find_upstream_modules(module) & graph.find_downstream_modules(module))
            seen |= component
            if len(component) > 1 or graph.direct_import_exists(importer=module, imported=module):
                cycles.append(sorted(component))
        packages = [m.name for m in self.packages or []]  # type: ignore[attr-defined]
        loops = sorted(graph.nominate_cycle_breakers(*packages)) if len(packages) > 1 else []
        return ContractCheck(kept=not (cycles or loops), metadata={"cycles": cycles, "loops": loops})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print_error(f"Cycle: {', '.join(cycle)}", bold=False)
        for importer, imported in check.metadata["loops"]:
            output.print_error(f"Loop between root packages, broken by removing: {importer} -> {imported}",
                               bold=False)
