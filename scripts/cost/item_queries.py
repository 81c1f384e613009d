"""The Price List query for each fixed item of the price table (scripts/cost/item_prices.py asks them), kept apart
from boto3 so that the estimate can tell, without importing it, which missing prices `cost --refresh` fetches.

The service codes, product families and attribute values are the ones infracost prices the same resources with
(infracost/infracost internal/resources/aws: nat_gateway.go@03858895 "NAT Gateway" + usagetype NatGateway-Hours;
lb.go@034170da AWSELB "Load Balancer-Network", locationType "AWS Region", usagetype LoadBalancerUsage;
db_instance.go@02a71da5 "Database Instance" by instanceType/deploymentOption/databaseEngine, "Database Storage" by
deploymentOption/databaseEngine "Any"/volumeType, gp3's usagetype ending "-RDS:GP3-Storage"). infracost prices no
Lustre file system; its FSx resources (fsx_openzfs_file_system.go@0dfd181d) use AmazonFSx "Storage" with
fileSystemType/storageType, and the Lustre tiers are told apart by throughputCapacity (125/250/500/1000 MB/s/TiB
are PERSISTENT_2's only SSD tiers: AWS FSx for Lustre guide, managing-throughput-capacity), so a Lustre key
without one of those tiers is not asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RDS_ENGINES = {"mariadb": "MariaDB", "mysql": "MySQL", "postgres": "PostgreSQL"}  # db_instance.go's databaseEngine
RDS_VOLUMES = {"gp2": "General Purpose", "gp3": "General Purpose-GP3", "io1": "Provisioned IOPS"}
RDS_DEPLOYMENTS = {"single-az": "Single-AZ", "multi-az": "Multi-AZ"}
LUSTRE_SSD_TIERS = {"PERSISTENT_2": ("125", "250", "500", "1000")}


@dataclass(frozen=True)
class ItemQuery:
    service: str
    terms: dict[str, str]
    unit: str  # the priceDimension unit the table's key is in: "Hrs" or "GB-Mo"
    usagetype_suffix: str = ""  # usage types carry a region prefix (USW2-...), so only their ends are compared
    exclude_usagetype: tuple[str, ...] = ()


def query_for(key: str) -> ItemQuery | None:
    """The GetProducts query for a table key; None for a key the Price List is not asked for (a global item, or one
    whose product cannot be told apart)."""
    kind, *args = key.split(":")
    if kind == "natGatewayHour":
        return ItemQuery("AmazonEC2", {"productFamily": "NAT Gateway"}, "Hrs", "NatGateway-Hours")
    if kind == "nlbHour":
        return ItemQuery("AWSELB", {"productFamily": "Load Balancer-Network", "locationType": "AWS Region"}, "Hrs",
                         "LoadBalancerUsage")
    if kind == "rdsHour" and len(args) == 3 and args[0] in RDS_ENGINES and args[2] in RDS_DEPLOYMENTS:
        engine, instance_class, az = args
        return ItemQuery("AmazonRDS", {"productFamily": "Database Instance", "instanceType": instance_class,
                                       "deploymentOption": RDS_DEPLOYMENTS[az], "databaseEngine": RDS_ENGINES[engine]},
                         "Hrs")
    if kind == "rdsStorageGbMonth" and len(args) == 2 and args[0] in RDS_VOLUMES and args[1] in RDS_DEPLOYMENTS:
        volume, az = args
        suffix = {"gp3": {"single-az": "-RDS:GP3-Storage", "multi-az": "-RDS:Multi-AZ-GP3-Storage"}}
        return ItemQuery("AmazonRDS", {"productFamily": "Database Storage", "deploymentOption": RDS_DEPLOYMENTS[az],
                                       "databaseEngine": "Any", "volumeType": RDS_VOLUMES[volume]}, "GB-Mo",
                         suffix.get(volume, {}).get(az, ""))
    if kind == "fsxGbMonth" and len(args) == 2 and args[1] in LUSTRE_SSD_TIERS.get(args[0], ()):
        return ItemQuery("AmazonFSx", {"productFamily": "Storage", "fileSystemType": "Lustre", "storageType": "SSD",
                                       "throughputCapacity": args[1]}, "GB-Mo", exclude_usagetype=("Backup",))
    return None


INSTANCE_TYPE = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")  # "p5.48xlarge"; item keys are "nlbHour", "rdsHour:..."


def refreshable(what: str) -> bool:
    """Whether `cost --refresh` fetches a missing price: `what` is an estimate line's "<type or key> in <region>"."""
    name = what.split(" in ")[0]
    return bool(INSTANCE_TYPE.match(name)) or query_for(name) is not None
