"""Prices of the fixed items (NAT gateway and NLB hours, RDS instance hours and storage, FSx for Lustre storage)
from the AWS Price List API, for `slurm-eks cost --refresh`: one GetProducts query per table key
(scripts/cost/item_queries.py says which, and why those attributes).

An answer is taken only when the documents that match hold exactly one distinct non-zero on-demand price in the
expected unit; none, or several, leave the item unpriced with the reason, so a filter that matches the wrong
product can never be printed as a price.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import boto3
from botocore.client import BaseClient

from scripts.cost.item_queries import ItemQuery, query_for
from scripts.cost.price_list import on_demand_prices, pricing_endpoint_region, products, term_filters

SOURCE = "price-list-api-fixed"
WHERE = ("AWS Price List API GetProducts (AmazonEC2 NAT Gateway, AWSELB Load Balancer-Network, AmazonRDS, "
         "AmazonFSx Lustre; scripts/cost/item_queries.py names each query)")


def _filters(region: str, query: ItemQuery) -> list[dict[str, str]]:
    return term_filters(region, query.terms)


@dataclass
class ItemPrices:
    prices: dict[str, float] = field(default_factory=dict)
    unpriced: dict[str, str] = field(default_factory=dict)  # key -> why the Price List gave no price


def _answer(documents: Iterable[str], query: ItemQuery) -> tuple[float | None, str]:
    found: set[float] = set()
    for usagetype, unit, usd in on_demand_prices(documents):
        if unit != query.unit or not usagetype.endswith(query.usagetype_suffix):
            continue
        if any(word in usagetype for word in query.exclude_usagetype):
            continue
        found.add(usd)
    if len(found) == 1:
        return found.pop(), ""
    if not found:
        return None, f"no {query.service} product matched"
    return None, f"{len(found)} different {query.service} prices matched ({', '.join(map(str, sorted(found)))})"


def fetch_item_prices(region: str, keys: Iterable[str], client: BaseClient | None = None) -> ItemPrices:
    """The price of each key the Price List can answer in `region`; the others with the reason."""
    result, keys = ItemPrices(), sorted(set(keys))
    if keys and client is None:
        client = boto3.client("pricing", region_name=pricing_endpoint_region(region))
    for key in keys:
        if (query := query_for(key)) is None:
            result.unpriced[key] = "not an item the Price List is asked for"
            continue
        usd, why = _answer(products(client, query.service, _filters(region, query)), query)
        if usd is None:
            result.unpriced[key] = why
        else:
            result.prices[key] = usd
    return result
