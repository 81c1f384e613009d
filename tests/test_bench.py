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


def test_gpu_bench_takes_the_median_after_warm_up_and_mfu_against_the_peak() -> None:
    from benchmarks.bench_gpu import peak_flops, summarise

    events = [{"event": "start"}, {"step": 5, "tokens_per_s": 10.0}, {"step": 10, "tokens_per_s": 100.0},
              {"step": 15, "tokens_per_s": 120.0}, {"step": 20, "tokens_per_s": 110.0}, {"event": "done"}]
    result = summarise(events, warmup=1, flops_per_token=int(1e12), peak=989e12, devices=8)
    assert result["tokens_per_s"] == 110.0 and result["tokens_per_s_range"] == [100.0, 120.0]
    assert result["mfu"] == round(110.0 * 1e12 / (989e12 * 8), 4)
    assert summarise(events, 1, 1, None, 8)["mfu"] is None
    assert peak_flops("NVIDIA H100 80GB HBM3") == 989e12 and peak_flops("NVIDIA A10G") == 125e12
    assert peak_flops("NVIDIA A100-SXM4-40GB") == 312e12 and peak_flops(None) is None
