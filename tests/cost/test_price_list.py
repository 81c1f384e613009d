"""The Price List refresh against recorded GetProducts answers (botocore's Stubber checks each request against the
pricing API's model). A PriceList entry is a JSON document with product.attributes and terms.OnDemand.<sku>.<term>
.priceDimensions.<rate>.pricePerUnit, the shape Karpenter reads (aws/karpenter-provider-aws v1.14.1
pkg/providers/pricing/pricing.go onDemandPage; pkg/fake/pricingapi.go NewOnDemandPriceWithCurrency)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber

from scripts.cost import price_list
from scripts.cost.price_table import TABLE_PATH, PriceTable


def document(instance_type: str, usd: str) -> str:
    sku = "XYZSKU0000000000"
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku,
                    "attributes": {"instanceType": instance_type, "regionCode": "us-east-1", "tenancy": "Shared",
                                   "operatingSystem": "Linux", "capacitystatus": "Used", "preInstalledSw": "NA"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku,
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": "Hrs", "pricePerUnit": {"USD": usd}, "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7"}}}}},
        "version": "20260706000000", "publicationDate": "2026-07-06T00:00:00Z"})


def stubbed(answers: dict[str, list[str]]) -> tuple[object, Stubber]:
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    for instance_type in sorted(answers):
        stub.add_response("get_products", {"PriceList": answers[instance_type], "FormatVersion": "aws_v1"},
                          {"ServiceCode": "AmazonEC2", "Filters": ANY, "MaxResults": 100})
    return client, stub


def test_fetches_each_type_with_karpenters_filters() -> None:
    client, stub = stubbed({"m7i.2xlarge": [document("m7i.2xlarge", "0.4032000000")],
                            "p5.48xlarge": [document("p5.48xlarge", "55.0400000000")],
                            "trn2.48xlarge": []})
    with stub:
        prices = price_list.fetch_instance_prices("us-east-1", ["p5.48xlarge", "m7i.2xlarge", "trn2.48xlarge"],
                                                  client)
    assert prices == {"p5.48xlarge": 55.04, "m7i.2xlarge": 0.4032}  # no price: left out, never 0
    filters = {f["Field"]: f["Value"] for f in price_list._filters("us-west-2", "p5.48xlarge")}
    assert filters["regionCode"] == "us-west-2" and filters["marketoption"] == "OnDemand"
    assert filters["operatingSystem"] == "Linux" and filters["tenancy"] == "Shared"


def test_zero_priced_dimensions_are_skipped() -> None:
    assert price_list.on_demand_price(document("p5.48xlarge", "0.0000000000")) is None


@pytest.mark.parametrize(("region", "endpoint"), [("us-west-2", "us-east-1"), ("eu-west-1", "eu-central-1"),
                                                  ("ap-northeast-1", "ap-south-1"), ("cn-north-1", "cn-northwest-1")])
def test_pricing_endpoint(region: str, endpoint: str) -> None:
    assert price_list.pricing_endpoint_region(region) == endpoint


def test_refresh_writes_the_region_with_its_source_and_date(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts.cli import cost
    from tests.cost.plans import plan, resource

    path = tmp_path / "prices.json"
    shutil.copy(TABLE_PATH, path)
    monkeypatch.setattr(price_list, "fetch_instance_prices",
                        lambda region, types: {"m7i.2xlarge": 0.4032} if "m7i.2xlarge" in types else {})
    system = resource("eks:index:ManagedNodeGroup", "system", instanceTypes=["m7i.2xlarge"])
    unpriced = cost.refresh(PriceTable.load(path), plan("us-west-2", resources=[system]))
    saved = PriceTable.load(path)
    assert saved.instance_hour("us-west-2", "m7i.2xlarge").source == price_list.SOURCE
    assert saved.data["sources"][price_list.SOURCE]["where"] == price_list.WHERE
    assert "p5.48xlarge" in unpriced.instances_unpriced  # the answer had none: reported, and the old price replaced
    assert saved.instance_hour("us-west-2", "p5.48xlarge") is None
