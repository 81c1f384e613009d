"""Every key of the stack config has an update policy (fail closed): the walk of the model finds each leaf and each
entry that comes and goes, and a key without a policy is reported, as a new one would be."""

from __future__ import annotations

from pydantic import Field

from components.config.base import Model
from components.config.cluster import ClusterConfig, Partition
from components.config.config_tree import nodes, parse, text
from components.config.update_policy import POLICIES, Kind, missing, policy_for


def test_every_key_of_the_config_has_an_update_policy() -> None:
    model_nodes = nodes(ClusterConfig)
    assert len(model_nodes) > 170  # the walk reaches the leaves of maps and lists, not only the top
    assert missing(model_nodes) == []


def test_a_new_key_without_a_policy_fails_the_check() -> None:
    class Storage(Model):
        fsx_new_setting: int = 1
        volumes: dict[str, Partition] = Field(default_factory=dict)

    class Config(ClusterConfig):
        brand_new: Storage = Field(default_factory=Storage)

    assert missing(nodes(Config)) == ["brandNew.fsxNewSetting", "brandNew.volumes.*",
                                      *(f"brandNew.volumes.*.{k}" for k in ("instanceTypes", "minNodes", "maxNodes",
                                        "efa", "capacityType", "capacityReservationIds", "idleTimeout", "default",
                                        "maxTime", "image", "accounts")),
                                      "brandNew.volumes.*.checkpointStore",
                                      "brandNew.volumes.*.checkpointStore.intervalSeconds",
                                      "brandNew.volumes.*.checkpointStore.keep"]


def test_a_policy_for_a_key_the_model_lacks_is_reported() -> None:
    class Smaller(Model):
        region: str

    assert "clusterName (no such key)" in missing(nodes(Smaller))


def test_a_key_without_a_policy_is_unsupported_at_run_time() -> None:
    _, policy = policy_for(("storage", "fsx", "somethingNew"))
    assert policy.kind is Kind.UNSUPPORTED and policy.kind.refused


def test_patterns_match_names_and_items() -> None:
    assert text(policy_for(("partitions", "gpu-a100", "maxNodes"))[0]) == "partitions.*.maxNodes"
    assert text(policy_for(("storage", "fsx", "repositories", 2, "s3"))[0]) == "storage.fsx.repositories[].s3"
    assert parse("storage.fsx.repositories[0].s3") == ("storage", "fsx", "repositories", 0, "s3")
    assert all(parse(k) == parse(text(parse(k))) for k in POLICIES)
