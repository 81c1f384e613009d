"""Every instance type in the catalog, in every region the validators accept, is either priced from the table or
printed as a "no price" line that names the type and the region: the estimate never drops one silently."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from components.catalog import CATALOG
from components.config.rules.cluster import REGION
from scripts.cost.estimate import estimate
from scripts.cost.price_table import PriceTable
from scripts.cost.render import gaps
from tests.cost.plans import group, plan

TABLE = PriceTable.load()
EVERY_TYPE = {name.replace(".", "-"): group([name], 0, 1) for name in CATALOG}


def check_region(region: str) -> None:
    e = estimate(plan(region, EVERY_TYPE), TABLE)
    notes = [gap.message for gap in gaps(e, TABLE)]
    assert len(e.lines) == len(CATALOG)
    for line, name in zip(e.lines, CATALOG, strict=True):
        if TABLE.instance_hour(region, name) is None:
            assert line.max is None and f"no price: {name} in {region}" in notes
        else:
            assert line.max == TABLE.instance_hour(region, name).usd


@settings(max_examples=60, deadline=None)
@given(st.from_regex(REGION, fullmatch=True))
def test_any_accepted_region(region: str) -> None:
    check_region(region)


def test_the_regions_of_the_table() -> None:
    for region in TABLE.data["regions"]:
        check_region(region)
    # The catalog types EC2 lists no public on-demand price for in the table's sources.
    assert [n for n in CATALOG if TABLE.instance_hour("us-east-1", n) is None] == ["p5e.48xlarge", "trn2.48xlarge"]
