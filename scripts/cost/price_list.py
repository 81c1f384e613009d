"""Instance prices from the AWS Price List API (GetProducts), the way Karpenter fetches them
(aws/karpenter-provider-aws v1.14.1 pkg/providers/pricing/pricing.go: NewAPI's endpoint choice,
fetchOnDemandPricing's filters, onDemandPage's reading of each PriceList document).

The fixed items (NAT, NLB, RDS, FSx) have their own queries in scripts/cost/item_prices.py; both read the
documents with the same reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import boto3
from botocore.client import BaseClient

SOURCE = "price-list-api"
WHERE = "AWS Price List API GetProducts (AmazonEC2, Linux, shared tenancy, on-demand)"


def pricing_endpoint_region(region: str) -> str:
    """The Price List API answers in a few regions only (pricing.go NewAPI)."""
    for prefix, endpoint in (("ap-", "ap-south-1"), ("cn-", "cn-northwest-1"), ("eu-", "eu-central-1")):
        if region.startswith(prefix):
            return endpoint
    return "us-east-1"


def term_filters(region: str, terms: dict[str, str]) -> list[dict[str, str]]:
    """GetProducts filters: the region and each term matched exactly."""
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in {"regionCode": region, **terms}.items()]


def _filters(region: str, instance_type: str) -> list[dict[str, str]]:
    # fetchOnDemandPricing's filters plus the standard (not bare metal) family, narrowed to one type.
    return term_filters(region, {"serviceCode": "AmazonEC2", "preInstalledSw": "NA", "operatingSystem": "Linux",
                                 "capacitystatus": "Used", "marketoption": "OnDemand", "tenancy": "Shared",
                                 "productFamily": "Compute Instance", "instanceType": instance_type})


def products(client: BaseClient, service: str, filters: list[dict[str, str]]) -> Iterator[str]:
    """Every PriceList document GetProducts answers, page after page."""
    pages = client.get_paginator("get_products").paginate(ServiceCode=service, Filters=filters, MaxResults=100)
    for page in pages:
        yield from page["PriceList"]


def _dimensions(item: dict[str, Any], currency: str = "USD") -> Iterator[tuple[str, float]]:
    """(unit, price) of each non-zero on-demand price dimension of one PriceList document."""
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if price := float(dimension.get("pricePerUnit", {}).get(currency, "0") or 0):
                yield dimension.get("unit", ""), price


def on_demand_price(document: str, currency: str = "USD") -> tuple[str, float] | None:
    """(instance type, $/hour) of one PriceList document; None when it has no non-zero on-demand price."""
    item = json.loads(document)
    instance_type = item.get("product", {}).get("attributes", {}).get("instanceType", "")
    for _, price in _dimensions(item, currency):
        if instance_type:
            return instance_type, price
    return None


def on_demand_prices(documents: Iterable[str]) -> Iterator[tuple[str, str, float]]:
    """(usage type, unit, USD) of every non-zero on-demand price dimension of the documents."""
    for document in documents:
        item = json.loads(document)
        usagetype = item.get("product", {}).get("attributes", {}).get("usagetype", "")
        for unit, price in _dimensions(item):
            yield usagetype, unit, price


def fetch_instance_prices(region: str, instance_types: Iterable[str], client: BaseClient | None = None
                          ) -> dict[str, float]:
    """$/hour of each type EC2 sells on demand in `region`; a type without a price is left out."""
    client = client or boto3.client("pricing", region_name=pricing_endpoint_region(region))
    prices: dict[str, float] = {}
    for instance_type in sorted(set(instance_types)):
        for document in products(client, "AmazonEC2", _filters(region, instance_type)):
            if found := on_demand_price(document):
                prices[found[0]] = found[1]
    return prices
