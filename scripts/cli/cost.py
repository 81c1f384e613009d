"""`slurm-eks cost --stack S`: what the stack costs per hour, idle (minNodes) and at full scale (maxNodes), from
its offline plan and the price table (scripts/cost). Registered by scripts/cli/main.py with `app.command()(cost)`.

Exit status: 0 printed, 2 the stack or the plan could not be read, or `--refresh` could not reach AWS.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from components.catalog import CATALOG
from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR
from components.findings_render import render_json
from scripts.cli.bars import bar
from scripts.cli.problems import CONFIG_ERROR_EXIT, Format, fail_config, load_plan_of, print_findings
from scripts.cost.estimate import Estimate, estimate, item_keys
from scripts.cost.price_table import TABLE_PATH, PriceTable
from scripts.cost.render import as_json, dollars, footnotes, gaps
from scripts.offline.plan_model import Plan


class CostFormat(StrEnum):
    table = "table"
    json = "json"


def table(e: Estimate, title: str) -> Table:
    """The estimate as a table that stays readable at 80 columns: money never wraps, a column is never narrower than
    its longest word (an instance type, a resource name), so text wraps between words, and notes go below the table,
    numbered, instead of in a column of their own."""
    notes = [f"({n}) {line.name}: {line.note}" for n, line in enumerate((x for x in e.lines if x.note), 1)]
    numbered = iter(range(1, len(notes) + 1))
    rows = [(f"{line.group} ({next(numbered)})" if line.note else line.group, line.name, line.what,
             dollars(line.idle), dollars(line.max)) for line in e.lines]
    bound = "≥" if e.missing else ""  # a lower bound: some line has no price (the warnings below name each)
    totals = ("total", "", "", bound + dollars(e.total("idle")), bound + dollars(e.total("max")))
    caption = [*notes, *(["≥: at least, some items have no price"] if e.missing else [])]
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False,
              caption="\n".join(caption) or None, caption_justify="left")
    for i, column in enumerate(("group", "name", "what", "idle $/h", "at max $/h")):
        money = "$" in column
        cells = [column, *(row[i] for row in (*rows, totals))]
        longest = max((len(word) for cell in cells for word in cell.split()), default=1)
        t.add_column(column, justify="right" if money else "left", no_wrap=money, min_width=longest,
                     overflow="fold")
    for row in rows:
        t.add_row(*row)
    t.add_section()
    t.add_row(*totals)
    return t


def chart(e: Estimate, width: int = 30) -> list[str]:
    """Each partition and pool at maxNodes as a bar against the largest, largest first: where the bill can go."""
    groups = sorted((line for line in e.lines if line.group in ("partition", "pool") and line.max is not None),
                    key=lambda line: (-(line.max or 0.0), line.name))
    if not groups:
        return []
    largest = max(line.max or 0.0 for line in groups)
    name_width = max(len(line.name) for line in groups)
    return ["at maxNodes, USD per hour:", *(f"  {line.name:<{name_width}}  {bar(line.max or 0.0, largest, width)}  "
                                           f"{dollars(line.max)}" for line in groups)]


def _plan(stack: str, stacks_dir: Path, plan_dir: Path | None) -> Plan:
    if plan_dir is not None:
        return load_plan_of(stack, plan_dir)  # a plan of another stack is not priced under this one's name
    from scripts.offline.plan import run_plan  # imports Pulumi

    return run_plan(stack, stacks_dir)[0]


@dataclass(frozen=True)
class Refreshed:
    instances_unpriced: list[str]  # types EC2 has no on-demand price for
    items: int  # fixed items priced
    items_unpriced: dict[str, str]  # item key -> why the Price List gave none


def refresh(prices: PriceTable, plan: Plan) -> Refreshed:
    """Fetch the plan region's prices from the Price List API into the table: the instance prices of every catalog
    type and every type the plan's node groups use (they replace the region's), then each fixed item the plan is
    priced with (an item the API cannot price keeps the table's sourced entry)."""
    from scripts.cost import item_prices, price_list  # boto3: a fifth of a second, for --refresh only

    region = plan.outputs["region"]
    wanted = set(CATALOG) | {t for r in plan.of_type("eks:index:ManagedNodeGroup") for t in r.inputs["instanceTypes"]}
    found = price_list.fetch_instance_prices(region, wanted)
    items = item_prices.fetch_item_prices(region, item_keys(plan) - set(prices.data["global"]))
    today = datetime.now(UTC).date().isoformat()
    prices.set_instances(region, found, price_list.SOURCE, price_list.WHERE, today)
    if items.prices:
        prices.set_items(region, items.prices, item_prices.SOURCE, item_prices.WHERE, today)
    prices.save()
    return Refreshed(sorted(wanted - found.keys()), len(items.prices), items.unpriced)


def cost(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
    plan_dir: Annotated[Path | None, typer.Option("--plan", exists=True,
                                                  help="price this plan (from `slurm-eks plan --out`) instead of "
                                                       "planning the stack")] = None,
    prices_file: Annotated[Path, typer.Option("--prices", help="the price table")] = TABLE_PATH,
    refresh_prices: Annotated[bool, typer.Option(
        "--refresh", help="first fetch the region's instance and fixed-item prices from the AWS Price List API into "
                          "the table")] = False,
    format: Annotated[CostFormat, typer.Option(help="table for people, json for tools")] = CostFormat.table,
) -> None:
    """Dollars per hour per partition and pool at maxNodes and at minNodes, plus the fixed part (EKS, NAT gateways,
    system and login nodes, FSx, RDS, NLBs), at list prices; items without a price are named, never guessed."""
    out, err = Console(soft_wrap=True), Console(stderr=True)
    try:
        plan, prices = _plan(stack, stacks_dir, plan_dir), PriceTable.load(prices_file)
    except ConfigError as exc:
        raise fail_config(exc, Format.json if format is CostFormat.json else Format.text) from None
    except (OSError, ValueError, KeyError) as exc:
        err.print(f"[red]error:[/] cannot read the plan or the price table: {escape(str(exc))}", highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    if refresh_prices:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            refreshed = refresh(prices, plan)
        except (BotoCoreError, ClientError) as exc:
            err.print(f"[red]error:[/] the Price List API did not answer: {escape(str(exc))}", highlight=False)
            err.print("set AWS credentials (pricing:GetProducts) and check the network", highlight=False)
            raise typer.Exit(CONFIG_ERROR_EXIT) from None
        except OSError as exc:
            err.print(f"[red]error:[/] cannot write the price table: {escape(str(exc))}", highlight=False)
            raise typer.Exit(CONFIG_ERROR_EXIT) from None
        err.print(f"refreshed {plan.outputs['region']} instance prices and {refreshed.items} fixed items in "
                  f"{prices.path}", highlight=False, markup=False)
        if refreshed.instances_unpriced:
            err.print(f"EC2 has no on-demand price for {', '.join(refreshed.instances_unpriced)}", highlight=False,
                      markup=False)
        for key, why in sorted(refreshed.items_unpriced.items()):
            err.print(f"not refreshed: {key}: {why}", highlight=False, markup=False)
    result: Estimate = estimate(plan, prices)
    if format is CostFormat.json:
        typer.echo(render_json(gaps(result, prices), **as_json(result)), nl=False)
        return
    out.print(table(result, f"cost of stack {stack} in {result.region}, USD per hour"), soft_wrap=False)
    for line in chart(result):
        out.print(line, highlight=False, markup=False)
    print_findings(gaps(result, prices), out)
    for line in footnotes(result, prices):
        out.print(line, highlight=False, markup=False)
