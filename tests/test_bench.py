"""The benchmark's bookkeeping: A and B alternate which runs first, and the ratio is taken per round."""

from __future__ import annotations

from tests.conftest import require_module

require_module("torch", "pip install -e '.[jobs]': the benchmark imports the training code")

from benchmarks.bench_train import interleaved  # noqa: E402


def test_rounds_alternate_and_ratios_are_per_round() -> None:
    order: list[str] = []
    a_times, b_times = iter([1.0, 2.0, 4.0]), iter([2.0, 2.0, 2.0])

    def a() -> float:
        order.append("a")
        return next(a_times)

    def b() -> float:
        order.append("b")
        return next(b_times)

    result = interleaved(3, a, b)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert result["ratio_b_over_a"] == {"min": 0.5, "median": 1.0, "max": 2.0}
    assert result["a_s"] == 2.0 and result["b_s"] == 2.0
