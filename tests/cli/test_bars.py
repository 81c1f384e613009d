"""The terminal bars: eighth-cell resolution, clipped at full, and where they appear (advise's memory per device,
cost's partitions and pools)."""

from __future__ import annotations

from typer.testing import CliRunner

from scripts.cli.bars import bar, memory_bar
from scripts.cli.main import app


def test_a_bar_is_the_share_in_eighth_cells() -> None:
    assert bar(0, 10, 4) == "    " and bar(10, 10, 4) == "████" and bar(5, 10, 4) == "██  "
    assert bar(1, 32, 4) == "▏   "  # 1/32 of 4 cells: one eighth of a cell
    assert bar(50, 10, 4) == "████"  # past full: full, never longer
    assert all(len(bar(v, 7, 12)) == 12 for v in (0, 0.1, 3.3, 7, 9))


def test_memory_bar_says_when_it_does_not_fit() -> None:
    assert memory_bar(40, 80, 8) == "[████    ] 40.0 of 80 GiB (50%)"
    assert memory_bar(96, 80, 8) == "[████████] 96.0 of 80 GiB (120% over)"


def test_advise_and_cost_draw_their_bars() -> None:
    runner = CliRunner(env={"COLUMNS": "120"})
    advised = runner.invoke(app, ["advise", "--stack", "prod", "--partition", "gpu-h100", "--model", "llama3-8b"])
    assert advised.exit_code == 0 and "memory per GPU: [" in advised.output and " of 80 GiB (" in advised.output
    cost = runner.invoke(app, ["cost", "--stack", "prod"])
    chart = cost.output.split("at maxNodes, USD per hour:\n")[1].splitlines()[:6]
    assert [line.split()[0] for line in chart] == ["trainium", "gpu-h100", "gpu-a100", "ml-h100", "ml-trn1", "ml-a10g"]
    assert "█" * 30 in chart[0] and chart[0].endswith("$792.96")  # the largest first, filling its bar
