"""The fixed items' Price List refresh (scripts/cost/item_prices.py) against a small price list that holds, beside
each product the estimate needs, the products a loose filter would also catch (the NLB's capacity units, the ALB,
Multi-AZ and MySQL instances, Multi-AZ and gp2 storage, FSx backups and the other Lustre tiers). botocore's Stubber
checks every GetProducts request against the pricing API's model; the answer to each is what TERM_MATCH selects
from that list: every named attribute equal (productFamily is the product's own field, the others its attributes).
The dollar figures are test values, not prices."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from scripts.cost import item_prices, price_list
from scripts.cost.estimate import estimate, item_keys
from scripts.cost.price_table import PriceTable
from tests.cost.plans import plan, resource

REGION = "us-west-2"
SKUS = itertools.count(1)


def product(service: str, family: str, usagetype: str, unit: str, usd: str, **attributes: str) -> dict[str, Any]:
    sku = f"SKU{next(SKUS):013d}"
    return {
        "product": {"productFamily": family, "sku": sku,
                    "attributes": {"regionCode": REGION, "usagetype": usagetype, "servicecode": service,
                                   **attributes}},
        "serviceCode": service,
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku,
            "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                "unit": unit, "pricePerUnit": {"USD": usd}, "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7"}}}}},
        "version": "20261201000000", "publicationDate": "2026-12-01T00:00:00Z"}


PRICE_LIST = [
    product("AmazonEC2", "NAT Gateway", "USW2-NatGateway-Hours", "Hrs", "1.0100000000", locationType="AWS Region"),
    product("AmazonEC2", "NAT Gateway", "USW2-NatGateway-Bytes", "GB", "9.9900000000", locationType="AWS Region"),
    product("AWSELB", "Load Balancer-Network", "USW2-LoadBalancerUsage", "Hrs", "1.0200000000",
            locationType="AWS Region"),
    product("AWSELB", "Load Balancer-Network", "USW2-LCUUsage", "LCU-Hrs", "9.9900000000", locationType="AWS Region"),
    product("AWSELB", "Load Balancer-Application", "USW2-LoadBalancerUsage", "Hrs", "9.9900000000",
            locationType="AWS Region"),
    product("AmazonRDS", "Database Instance", "USW2-InstanceUsage:db.t4g.medium", "Hrs", "1.0300000000",
            instanceType="db.t4g.medium", deploymentOption="Single-AZ", databaseEngine="MariaDB"),
    product("AmazonRDS", "Database Instance", "USW2-Multi-AZUsage:db.t4g.medium", "Hrs", "9.9900000000",
            instanceType="db.t4g.medium", deploymentOption="Multi-AZ", databaseEngine="MariaDB"),
    product("AmazonRDS", "Database Instance", "USW2-InstanceUsage:db.t4g.medium", "Hrs", "9.9800000000",
            instanceType="db.t4g.medium", deploymentOption="Single-AZ", databaseEngine="MySQL"),
    product("AmazonRDS", "Database Storage", "USW2-RDS:GP3-Storage", "GB-Mo", "1.0400000000",
            deploymentOption="Single-AZ", databaseEngine="Any", volumeType="General Purpose-GP3"),
    product("AmazonRDS", "Database Storage", "USW2-RDS:Multi-AZ-GP3-Storage", "GB-Mo", "9.9900000000",
            deploymentOption="Multi-AZ", databaseEngine="Any", volumeType="General Purpose-GP3"),
    product("AmazonRDS", "Database Storage", "USW2-RDS:GP2-Storage", "GB-Mo", "9.9700000000",
            deploymentOption="Single-AZ", databaseEngine="Any", volumeType="General Purpose"),
    product("AmazonFSx", "Storage", "USW2-Storage.SSD.250", "GB-Mo", "1.0500000000",
            fileSystemType="Lustre", storageType="SSD", throughputCapacity="250"),
    product("AmazonFSx", "Storage", "USW2-Storage.SSD.125", "GB-Mo", "9.9900000000",
            fileSystemType="Lustre", storageType="SSD", throughputCapacity="125"),
    product("AmazonFSx", "Storage", "USW2-BackupUsage", "GB-Mo", "9.9600000000",
            fileSystemType="Lustre", storageType="SSD", throughputCapacity="250"),
]

EXPECTED = {"natGatewayHour": 1.01, "nlbHour": 1.02, "rdsHour:mariadb:db.t4g.medium:single-az": 1.03,
            "rdsStorageGbMonth:gp3:single-az": 1.04, "fsxGbMonth:PERSISTENT_2:250": 1.05}


def term_match(service: str, filters: list[dict[str, str]], documents: list[dict[str, Any]]) -> list[str]:
    """What GetProducts answers: the documents of `service` whose every filtered field equals its value."""
    def field(d: dict[str, Any], name: str) -> str:
        return d["product"]["productFamily"] if name == "productFamily" else d["product"]["attributes"].get(name, "")
    return [json.dumps(d) for d in documents
            if d["serviceCode"] == service and all(field(d, f["Field"]) == f["Value"] for f in filters)]


def stubbed(keys: list[str], documents: list[dict[str, Any]]) -> tuple[Any, Stubber]:
    """A pricing client answering each key's query (in the order fetch_item_prices asks) from `documents`."""
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    for key in sorted(keys):
        query = item_prices.query_for(key)
        if query is None:
            continue
        filters = item_prices._filters(REGION, query)
        stub.add_response("get_products", {"PriceList": term_match(query.service, filters, documents),
                                           "FormatVersion": "aws_v1"},
                          {"ServiceCode": query.service, "Filters": filters, "MaxResults": 100})
    return client, stub


def test_each_item_is_priced_from_its_own_product_among_look_alikes() -> None:
    client, stub = stubbed(list(EXPECTED), PRICE_LIST)
    with stub:
        got = item_prices.fetch_item_prices(REGION, EXPECTED, client)
    stub.assert_no_pending_responses()
    assert got.prices == EXPECTED and got.unpriced == {}


def test_the_queries_use_the_cited_attributes() -> None:
    rds = item_prices.query_for("rdsHour:mariadb:db.t4g.medium:multi-az")
    assert rds is not None and rds.service == "AmazonRDS"
    assert rds.terms == {"productFamily": "Database Instance", "instanceType": "db.t4g.medium",
                         "deploymentOption": "Multi-AZ", "databaseEngine": "MariaDB"}
    nlb = item_prices.query_for("nlbHour")
    assert nlb is not None and (nlb.service, nlb.terms["productFamily"]) == ("AWSELB", "Load Balancer-Network")
    filters = {f["Field"]: f["Value"] for f in item_prices._filters("eu-west-1", nlb)}
    assert filters["regionCode"] == "eu-west-1" and all(f["Type"] == "TERM_MATCH"
                                                         for f in item_prices._filters("eu-west-1", nlb))


@pytest.mark.parametrize("key", ["eksClusterHour", "fsxGbMonth:SCRATCH_2", "fsxGbMonth:PERSISTENT_2:200",
                                 "rdsHour:oracle-ee:db.m7g.large:single-az", "rdsStorageGbMonth:gp3"])
def test_keys_the_price_list_is_not_asked_for(key: str) -> None:
    client, stub = stubbed([], [])
    with stub:  # no request at all
        got = item_prices.fetch_item_prices(REGION, [key], client)
    assert got.prices == {} and got.unpriced == {key: "not an item the Price List is asked for"}


def test_no_match_or_several_prices_leave_the_item_unpriced() -> None:
    twin_nat = product("AmazonEC2", "NAT Gateway", "USW2-NatGateway-Hours", "Hrs", "2.0200000000",
                       locationType="AWS Region", operation="Other")
    client, stub = stubbed(["natGatewayHour", "nlbHour"], [*PRICE_LIST[:2], twin_nat])  # no NLB product at all
    with stub:
        got = item_prices.fetch_item_prices(REGION, ["natGatewayHour", "nlbHour"], client)
    assert got.prices == {}
    assert got.unpriced == {"natGatewayHour": "2 different AmazonEC2 prices matched (1.01, 2.02)",
                            "nlbHour": "no AWSELB product matched"}


def test_item_keys_are_the_ones_the_estimate_looks_up() -> None:
    resources = [resource("aws:ec2/natGateway:NatGateway", "nat"),
                 resource("aws:fsx/lustreFileSystem:LustreFileSystem", "fsx", storageCapacity=4800,
                          deploymentType="PERSISTENT_2", perUnitStorageThroughput=250),
                 resource("aws:rds/instance:Instance", "db", engine="mariadb", instanceClass="db.t4g.medium",
                          multiAz=False, allocatedStorage=50, storageType="gp3"),
                 resource("kubernetes:core/v1:Service", "login", spec={"type": "LoadBalancer"})]
    assert item_keys(plan(REGION, resources=resources)) == set(EXPECTED)


def test_refresh_leaves_the_prod_estimate_without_a_no_price_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts.cli import cost
    from tests.plan.fixtures import shipped_plan

    prod = shipped_plan("prod")
    keys = item_keys(prod) - {"eksClusterHour"}
    assert keys == set(EXPECTED)  # prod's fixed part is exactly these
    client, stub = stubbed(sorted(keys), PRICE_LIST)
    monkeypatch.setattr(item_prices.boto3, "client", lambda *a, **k: client)
    monkeypatch.setattr(price_list, "fetch_instance_prices",
                        lambda region, types: {t: p.usd for t in types
                                               if (p := PriceTable.load().instance_hour(region, t))})
    path = tmp_path / "prices.json"
    table = PriceTable.load()
    for key in keys - {"natGatewayHour"}:  # a table without those sourced prices
        del table.data["regions"][REGION][key]
    table.path = path
    table.save()
    before = estimate(prod, PriceTable.load(path))
    assert len(before.missing) == 4
    with stub:
        refreshed = cost.refresh(PriceTable.load(path), prod)
    assert refreshed.items == 5 and refreshed.items_unpriced == {}
    saved = PriceTable.load(path)
    assert saved.item(REGION, "nlbHour").source == item_prices.SOURCE
    assert saved.data["sources"][item_prices.SOURCE]["where"] == item_prices.WHERE
    after = estimate(prod, saved)
    assert after.missing == [] and all(line.max is not None for line in after.lines)
    assert not list(tmp_path.glob(".prices.json.*"))  # written whole, no temporary left


def test_the_fix_of_a_missing_price_says_whether_refresh_fetches_it() -> None:
    from scripts.cost.render import gaps

    resources = [resource("aws:ec2/natGateway:NatGateway", "nat"),
                 resource("aws:fsx/lustreFileSystem:LustreFileSystem", "scratch", storageCapacity=1200,
                          deploymentType="SCRATCH_2")]
    empty = PriceTable({"sources": {}, "global": {}, "regions": {}})
    fixes = {f.message: f.fix for f in gaps(estimate(plan(REGION, resources=resources), empty), empty)}
    assert fixes["no price: natGatewayHour in us-west-2"].startswith("run `slurm-eks cost --refresh`")
    assert fixes["no price: fsxGbMonth:SCRATCH_2 in us-west-2"] == (
        "add a sourced price to prices.json (`slurm-eks cost --refresh` does not fetch this item)")
