"""The mutation driver's bookkeeping (no mutation run): reading cosmic-ray's dump, the equivalents list, the rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.mutation.run import EQUIVALENT, TESTS, Mutant, mutants, read_equivalents, report

REPO = Path(__file__).resolve().parents[2]


def row(line: int, operator: str, outcome: str | None) -> str:
    spec = {"module_path": "m.py", "operator_name": f"core/{operator}", "occurrence": 0,
            "start_pos": [line, 4], "end_pos": [line, 6]}
    result = None if outcome is None else {
        "worker_outcome": "skipped" if outcome == "skipped" else "normal",
        "test_outcome": None if outcome == "skipped" else outcome,
        "diff": f"--- a\n+++ b\n-    x = a == b\n+    x = a != b  # line {line}\n"}
    return json.dumps([{"job_id": str(line), "mutations": [spec]}, result])


def test_reads_the_dump_without_skipped_or_pending_jobs() -> None:
    dump = "\n".join([row(3, "AddNot", "killed"), row(1, "ReplaceComparisonOperator_Eq_NotEq", "survived"),
                      row(5, "AddNot", "skipped"), row(6, "AddNot", None)])
    assert mutants(dump) == [
        Mutant("m.py", 1, 4, "ReplaceComparisonOperator_Eq_NotEq", "survived", "x = a != b  # line 1"),
        Mutant("m.py", 3, 4, "AddNot", "killed", "x = a != b  # line 3")]


def test_equivalents_leave_the_rate(capsys: pytest.CaptureFixture[str]) -> None:
    found = [Mutant("m.py", n, 0, "AddNot", "killed", "") for n in range(9)]
    found += [Mutant("m.py", 20, 0, "AddNot", "survived", "a"), Mutant("m.py", 21, 0, "AddNot", "survived", "b")]
    assert not report("m.py", found, {})  # 9/11
    assert report("m.py", found, {"m.py:20:0 AddNot": "why"})  # 9/10
    out = capsys.readouterr().out
    assert "m.py: 9/10 killed (90%); 1 equivalent" in out and "m.py:21:0 AddNot  b  [SURVIVED]" in out


def test_an_equivalent_excuses_survivors_only(capsys: pytest.CaptureFixture[str]) -> None:
    """NumberReplacer's n-1 and n+1 share a key: the killed one still counts."""
    found = [Mutant("m.py", 1, 0, "NumberReplacer", outcome, "") for outcome in ("killed", "survived")]
    assert report("m.py", found, {"m.py:1:0 NumberReplacer": "why"})
    assert "m.py: 1/1 killed (100%); 1 equivalent" in capsys.readouterr().out


def test_an_equivalent_needs_a_reason(tmp_path: Path) -> None:
    listed = tmp_path / "equivalent.txt"
    listed.write_text("# comment\n\nm.py:1:0 AddNot -- x is never None here\n")
    assert read_equivalents(listed) == {"m.py:1:0 AddNot": "x is never None here"}
    listed.write_text("m.py:1:0 AddNot\n")
    with pytest.raises(SystemExit, match="give a reason"):
        read_equivalents(listed)


def test_the_table_names_real_modules_and_tests() -> None:
    assert [p for m, tests in TESTS.items() for p in (m, *tests) if not (REPO / p).is_file()] == []
    assert all(key.split(":")[0] in TESTS for key in read_equivalents(EQUIVALENT))


def test_a_rechecked_mutant_is_recorded_as_the_session_records_it() -> None:
    from tests.mutation.run import _recheck_outcome

    assert _recheck_outcome({"worker_outcome": "normal", "test_outcome": "killed"}) == "KILLED"
    assert _recheck_outcome({"worker_outcome": "normal", "test_outcome": "survived"}) == "SURVIVED"
    assert _recheck_outcome({"worker_outcome": "timeout", "test_outcome": None}) == "KILLED"
    assert _recheck_outcome({"worker_outcome": "exception", "test_outcome": None}) == "INCOMPETENT"


def test_only_annotations_python_never_evaluates_are_excused() -> None:
    from tests.mutation.run import in_annotation, unevaluated_annotations

    source = ("from __future__ import annotations\nfrom dataclasses import dataclass\n\n"
              "def f(a: int | None, *, b: str | None = None) -> int | None:\n    return a | 1\n\n"
              "@dataclass\nclass D:\n    x: int | None\n")
    spans = unevaluated_annotations(source)

    def at(line: int, col: int) -> bool:
        return in_annotation(Mutant("m.py", line, col, "ReplaceBinaryOperator_BitOr_Add", "survived", ""), spans)

    assert at(4, 13) and at(4, 31) and at(4, 54) and at(9, 11)  # the `|` of parameters, return, dataclass field
    assert not at(5, 11)  # `a | 1` runs
    assert unevaluated_annotations(source.replace("from __future__ import annotations\n", "")) == []
    assert unevaluated_annotations(source + "import typer\n") == []  # typer reads them to build the CLI
    model = "from __future__ import annotations\nfrom pydantic import BaseModel\n\nclass M(BaseModel):\n    x: int\n"
    assert unevaluated_annotations(model) == []  # pydantic evaluates a model's fields


def test_a_surviving_annotation_mutant_counts_as_equivalent(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    module = tmp_path / "m.py"  # absolute: report() reads REPO / module, which is then this file
    module.write_text("from __future__ import annotations\n\ndef f(v: int) -> int | None:\n    return v\n")
    found = [Mutant(str(module), 3, 21, "ReplaceBinaryOperator_BitOr_Add", "survived", "int + None")]
    assert report(str(module), found, {})
    assert "[equivalent: annotation" in capsys.readouterr().out


def test_deselected_tests_exist_and_leave_some_tests() -> None:
    import subprocess
    import sys

    from tests.mutation.run import DESELECT, _test_command

    for module, expression in DESELECT.items():
        names = [n.strip() for n in expression.replace("not ", "").split(" and ")]
        listed = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *TESTS[module]],
                                cwd=REPO, capture_output=True, text=True).stdout
        assert all(name in listed for name in names), f"{module}: -k names a test that does not exist"
        assert _test_command(module)[-2:] == ["-k", expression]
