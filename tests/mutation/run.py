"""`make mutate`: mutation testing (cosmic-ray) of the modules that decide safety, each against a small set of
targeted tests. Prints the kill rate per module and every survivor; survivors explained in equivalent.txt are
left out of the rate. Exits 1 when a module kills under 90% of the rest.

cosmic-ray writes each mutant into the file on disk, so every module is mutated in a scratch copy of the working
tree (build/mutation/<module>/): the tree others edit and test is never touched.

    python -m tests.mutation.run                          # every module (long: run it on demand, not in CI)
    python -m tests.mutation.run scripts/checks/order.py  # some modules
    python -m tests.mutation.run --report scripts/checks/order.py  # its last run, judged again
    python -m tests.mutation.run --recheck scripts/checks/order.py # its last run's survivors, tested again

`--recheck` runs only the unexplained survivors of the last run against the current tests (in a fresh scratch copy) and
records the new outcomes in that run's session: after tests are added for survivors, minutes instead of a
whole run. Mutants killed before stay killed as long as no test was removed; a whole run re-measures all.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
EQUIVALENT = HERE / "equivalent.txt"
SCRATCH = REPO / "build" / "mutation"
THRESHOLD = 0.90
RECHECK_TIMEOUT_S = 120  # per mutant, for the pending ones a --recheck runs (a full run measures its own)

# module -> the tests that should kill its mutants (fast, offline; the whole suite per mutant would take days).
TESTS: dict[str, tuple[str, ...]] = {
    **{f"components/config/rules/{domain}.py": ("tests/config/test_validators.py", "tests/config/test_boundaries.py")
       for domain in ("registry", "cluster", "network", "storage", "login", "slurm", "partitions", "pools", "addons",
                      "health")},
    "policy/rules.py": ("tests/policy/test_rules.py", "tests/policy/test_waivers.py"),
    "components/compute/nodepools.py": ("tests/karpenter/test_nodepools.py",),
    "components/slinky/specs.py": ("tests/slinky/test_access.py", "tests/slinky/test_node_fit.py",
                                   "tests/slinky/test_partitions.py"),
    "components/lifecycle/autoscaling.py": ("tests/slinky/test_partitions.py", "tests/checks/test_eviction.py"),
    "scripts/checks/network.py": ("tests/checks/test_network.py",),
    "scripts/checks/order.py": ("tests/checks/test_order.py",),
    "scripts/checks/iam_policy.py": ("tests/checks/test_iam_policy.py",),
    "jobs/render.py": ("tests/render/test_render.py", "tests/render/test_render_limits.py",
                       "tests/render/test_script_behaviour.py"),
    "slurm/jobinfo.py": ("tests/slurm/test_jobinfo_normalise.py", "tests/slurm/test_client_backends.py"),
    "scripts/offline/diff.py": ("tests/cli/test_diff.py",),
    "slurm/agent/health/repair.py": ("tests/health/test_repair.py", "tests/health/test_controller.py"),
    "slurm/agent/health/nodes.py": ("tests/health/test_nodes.py", "tests/health/test_repair.py"),
    "slurm/agent/health/active.py": ("tests/health/test_active.py",),
}

# Tests left out of a module's mutation runs (pytest -k): they take most of the time and test something else.
DESELECT: dict[str, str] = {
    # Real torchrun processes that check how torch reads the environment the script exports (13 s and 4 s).
    "jobs/render.py": "not every_worker_line_carries_its_global_rank and not reads_the_shutdown_timeout",
}

# Operators left out: they multiply the run time and mostly yield mutants that are dead on arrival
# (str + str -> str ** str raises at once) or equivalent (x == "a" -> x is "a" holds for interned strings).
EXCLUDED_OPERATORS = (
    r"core/ReplaceBinaryOperator_\w+_(Div|FloorDiv|Mod|Pow|LShift|RShift|BitXor)$",
    r"core/ReplaceComparisonOperator_(Eq|NotEq|Lt|LtE|Gt|GtE)_(Is|IsNot)$",
    r"core/ReplaceComparisonOperator_(Is|IsNot)_(Lt|LtE|Gt|GtE)$",
    r"core/Variable(Replacer|Inserter)$",
)


@dataclass(frozen=True)
class Mutant:
    path: str
    line: int
    col: int
    operator: str
    outcome: str  # killed, survived, incompetent
    mutated: str  # the changed source line, for the report
    # cosmic-ray's address of the mutant (which match of the operator) and its job: for --recheck only
    occurrence: int = field(default=0, compare=False)
    job_id: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line}:{self.col} {self.operator}"


def read_equivalents(path: Path = EQUIVALENT) -> dict[str, str]:
    """`path:line:col operator -- reason` per line; a key without a reason is an error, not an excuse."""
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, reason = line.partition(" -- ")
        if not sep or not reason.strip():
            raise SystemExit(f"{path.name}:{number}: give a reason after ' -- ': {line}")
        found[key.strip()] = reason.strip()
    return found


ANNOTATION_REASON = "annotation: the module has `from __future__ import annotations` and nothing evaluates it"


def unevaluated_annotations(source: str) -> list[tuple[int, int, int, int]]:
    """Spans (line, col, end line, end col) of the annotations Python never evaluates: under `from __future__
    import annotations` a function's parameter and return annotations, and a field annotation of a class that is
    not a pydantic model (dataclasses read only the text, for ClassVar and InitVar). A module that imports typer or
    calls get_type_hints or validate_call evaluates them, so it gets no spans."""
    tree = ast.parse(source)
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
                 any(a.name == "annotations" for a in n.names) for n in tree.body)
    if not future or re.search(r"\b(typer|get_type_hints|validate_call)\b", source):
        return []
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            every = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]
            found += [a.annotation for a in every if a is not None and a.annotation is not None]
            found += [node.returns] if node.returns is not None else []
        elif isinstance(node, ast.ClassDef) and not any("BaseModel" in ast.unparse(b) for b in node.bases):
            found += [n.annotation for n in node.body if isinstance(n, ast.AnnAssign)]
    return [(a.lineno, a.col_offset, a.end_lineno or a.lineno, a.end_col_offset or 0) for a in found]


def in_annotation(m: Mutant, spans: list[tuple[int, int, int, int]]) -> bool:
    return any((line, col) <= (m.line, m.col) < (end, end_col) for line, col, end, end_col in spans)


def copy_tree(dest: Path) -> None:
    """The working tree as git sees it (tracked and new files, not ignored ones), uncommitted edits included."""
    if dest.exists():
        shutil.rmtree(dest)
    listed = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def cosmic_ray(*args: str, cwd: Path) -> str:
    tool = Path(sys.executable).parent / args[0]
    done = subprocess.run([str(tool), *args[1:]], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def mutants(dump: str) -> list[Mutant]:
    found = []
    for row in dump.splitlines():
        item, result = json.loads(row)
        if result is None or result["worker_outcome"] == "skipped":
            continue
        spec = item["mutations"][0]
        added = [d[1:].strip() for d in (result.get("diff") or "").splitlines()
                 if d.startswith("+") and not d.startswith("+++")]
        found.append(Mutant(spec["module_path"], spec["start_pos"][0], spec["start_pos"][1],
                            spec["operator_name"].removeprefix("core/"), result.get("test_outcome") or "incompetent",
                            added[0] if added else "", spec["occurrence"], item["job_id"]))
    return sorted(found, key=lambda m: (m.line, m.col, m.operator))


def scratch(module: str) -> Path:
    return SCRATCH / re.sub(r"\W", "_", module.removesuffix(".py"))


def last_run(module: str) -> list[Mutant]:
    """The results of the module's last run, to re-judge them after equivalent.txt changes without hours of tests."""
    if not (scratch(module) / "session.sqlite").is_file():
        raise SystemExit(f"{module}: no earlier run in {scratch(module)}")
    return mutants(cosmic_ray("cosmic-ray", "dump", "session.sqlite", cwd=scratch(module)))


def _test_command(module: str) -> list[str]:
    deselect = ["-k", DESELECT[module]] if module in DESELECT else []
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS[module], *deselect]


def recheck(module: str) -> list[Mutant]:
    """The last run finished (mutants it had not reached yet, if it was cut short) and its survivors tested
    again, against the current tests (see the module docstring)."""
    work = scratch(module)
    last_run(module)  # there is one
    kept = work.parent / f"{work.name}.session.sqlite"
    shutil.copy2(work / "session.sqlite", kept)  # copy_tree empties the scratch directory
    copy_tree(work)
    shutil.move(kept, work / "session.sqlite")
    write_config(module, work, timeout=RECHECK_TIMEOUT_S)
    cosmic_ray("cosmic-ray", "exec", "mutation.toml", "session.sqlite", cwd=work)  # the pending ones, if any
    command = shlex.join(_test_command(module))
    # Explained survivors survive again by definition: `--report` still lists them, and a full run re-tests them.
    explained = explained_keys(module, last_run(module), read_equivalents())
    for survivor in [m for m in last_run(module) if m.outcome == "survived" and m.key not in explained]:
        out = cosmic_ray("cosmic-ray", "mutate-and-test", module, f"core/{survivor.operator}",
                         str(survivor.occurrence), command, cwd=work)
        outcome = _recheck_outcome(json.loads(out))
        with sqlite3.connect(work / "session.sqlite") as db:
            db.execute("UPDATE work_results SET test_outcome = ? WHERE job_id = ?", (outcome, survivor.job_id))
    return last_run(module)


def _recheck_outcome(result: dict[str, str | None]) -> str:
    """The session's test_outcome (the enum's name) for a `mutate-and-test` result; a mutant whose tests ran
    past the timeout counts as killed, as in a full run."""
    if result.get("test_outcome"):
        return str(result["test_outcome"]).upper()
    return "KILLED" if result.get("worker_outcome") == "timeout" else "INCOMPETENT"


@contextlib.contextmanager
def exclusive(module: str) -> Iterator[None]:
    """One run per module at a time: a second one would rewrite the scratch copy under the first."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    with open(SCRATCH / f"{scratch(module).name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"{module}: another mutation run of it is in progress; wait for it") from None
        yield


def write_config(module: str, work: Path, timeout: float) -> Path:
    config = work / "mutation.toml"
    excluded = ", ".join(json.dumps(e) for e in EXCLUDED_OPERATORS)
    config.write_text(
        f'[cosmic-ray]\nmodule-path = "{module}"\ntimeout = {timeout:.0f}\nexcluded-modules = []\n'
        f"test-command = {json.dumps(shlex.join(_test_command(module)))}\n"
        f'[cosmic-ray.distributor]\nname = "local"\n'
        f"[cosmic-ray.filters.operators-filter]\nexclude-operators = [{excluded}]\n")
    return config


def mutate(module: str) -> list[Mutant]:
    work = scratch(module)
    copy_tree(work)
    command = _test_command(module)
    start = time.monotonic()
    baseline = subprocess.run(command, cwd=work, capture_output=True, text=True)
    if baseline.returncode != 0:
        raise SystemExit(f"{module}: its tests fail before any mutation:\n{baseline.stdout[-3000:]}")
    # Generous: a mutant that loops forever counts as killed once it runs past this.
    config = write_config(module, work, timeout=max(30.0, 5 * (time.monotonic() - start)))
    cosmic_ray("cosmic-ray", "init", config.name, "session.sqlite", cwd=work)
    cosmic_ray("cr-filter-operators", "session.sqlite", config.name, cwd=work)
    cosmic_ray("cosmic-ray", "exec", config.name, "session.sqlite", cwd=work)
    return mutants(cosmic_ray("cosmic-ray", "dump", "session.sqlite", cwd=work))


def explained_keys(module: str, found: list[Mutant], equivalents: dict[str, str]) -> dict[str, str]:
    """The equivalents list, plus each surviving mutant inside an annotation Python never evaluates."""
    source = REPO / module
    spans = unevaluated_annotations(source.read_text()) if source.is_file() else []
    survivors = [m for m in found if m.outcome == "survived"]
    return {**equivalents, **{m.key: ANNOTATION_REASON for m in survivors if in_annotation(m, spans)}}


def report(module: str, found: list[Mutant], equivalents: dict[str, str]) -> bool:
    """Print the module's figures and survivors; True when it meets the threshold."""
    survivors = [m for m in found if m.outcome == "survived"]
    equivalents = explained_keys(module, found, equivalents)
    explained = [m for m in survivors if m.key in equivalents]
    # Only survivors are excused: a key also names a killed sibling (NumberReplacer's n-1 and n+1 at one spot).
    counted = [m for m in found if m not in explained and m.outcome != "incompetent"]
    killed = sum(m.outcome == "killed" for m in counted)
    rate = killed / len(counted) if counted else 1.0
    print(f"{module}: {killed}/{len(counted)} killed ({rate:.0%}); {len(explained)} equivalent, "
          f"{sum(m.outcome == 'incompetent' for m in found)} incompetent, {len(found)} mutants")
    for m in survivors:
        note = f"equivalent: {equivalents[m.key]}" if m in explained else "SURVIVED"
        print(f"  {m.key}  {m.mutated}  [{note}]")
    keys = {m.key for m in found}
    for key in equivalents:
        if key.startswith(f"{module}:") and key not in keys:
            print(f"  stale entry in {EQUIVALENT.name} (no such mutant now): {key}")
    return rate >= THRESHOLD


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", default=list(TESTS), help="default: every module in the table")
    parser.add_argument("--report", action="store_true", help="judge the last run again, mutating nothing")
    parser.add_argument("--recheck", action="store_true", help="test the last run's survivors again")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in TESTS]
    if unknown:
        parser.error(f"not in the table: {', '.join(unknown)} (known: {', '.join(TESTS)})")
    os.environ.setdefault("SLURM_EKS_SHARED", str(REPO.parent / "shared"))  # the copy sits elsewhere
    equivalents = read_equivalents()
    run = last_run if args.report else recheck if args.recheck else mutate
    failed = []
    for module in args.modules:
        with contextlib.nullcontext() if args.report else exclusive(module):
            if not report(module, run(module), equivalents):
                failed.append(module)
    if failed:
        print(f"under {THRESHOLD:.0%} killed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
