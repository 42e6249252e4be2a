"""to_status inverts the status part of parse for all three kinds; ipPrefixCount is excluded from the drift hash."""

from __future__ import annotations

import copy

from tests import builders
from tests.api.test_parse_ec2nodeclass import FULL_SPEC, FULL_STATUS, ec2
from tests.api.test_parse_nodeclaim import CONDITION

from karpy.api import hashing, manifest, parse, status


def test_ec2nodeclass_status_round_trips() -> None:
    obj = ec2(**FULL_SPEC)
    obj["status"] = copy.deepcopy(FULL_STATUS)
    obj["status"]["amis"][0]["deprecated"] = True
    nc = parse.ec2nodeclass(obj)
    written = status.to_status(nc)
    assert parse.ec2nodeclass({**manifest.to_manifest(nc), "status": written}) == nc
    # upstream's defaults are written explicitly, the end time in RFC 3339
    reservation = written["capacityReservations"][1]
    assert (reservation["reservationType"], reservation["state"], reservation["interruptible"]) == (
        "default",
        "active",
        True,
    )
    assert written["capacityReservations"][0]["endTime"] == "2024-06-01T12:00:00Z"


def test_nodeclaim_and_nodepool_status_round_trip() -> None:
    claim_obj = builders.nodeclaim("default-abcde")
    claim_obj["status"] = {
        "nodeName": "n1",
        "providerID": "aws:///us-west-2a/i-1",
        "imageID": "ami-1",
        "capacity": {"cpu": "2", "memory": "8Gi"},
        "allocatable": {"cpu": "1930m", "memory": "7Gi"},
        "lastPodEventTime": "2024-01-01T00:05:00Z",
        "conditions": [{"type": "Launched", **CONDITION, "observedGeneration": 1}],
    }
    claim = parse.nodeclaim(claim_obj)
    assert parse.nodeclaim({**manifest.to_manifest(claim), "status": status.to_status(claim)}) == claim
    pool_obj = builders.nodepool()
    pool_obj["status"] = {"resources": {"cpu": "8"}, "nodes": 2, "nodeClassObservedGeneration": 3}
    pool = parse.nodepool(pool_obj)
    assert status.to_status(pool) == {"resources": {"cpu": "8"}, "nodes": 2, "nodeClassObservedGeneration": 3}
    assert parse.nodepool({**manifest.to_manifest(pool), "status": status.to_status(pool)}) == pool


def test_ip_prefix_count_does_not_drift_but_placement_does() -> None:
    reference = hashing.ec2nodeclass_hash(parse.ec2nodeclass(ec2()))
    assert hashing.ec2nodeclass_hash(parse.ec2nodeclass(ec2(ipPrefixCount=4))) == reference
    placed = parse.ec2nodeclass(ec2(placementGroupSelector={"name": "pg"}))
    assert hashing.ec2nodeclass_hash(placed) != reference
