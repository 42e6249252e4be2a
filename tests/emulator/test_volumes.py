"""sim.volumes, the pure parts: node labels, VolumeBinding's filter verdicts, and the PV/PVC payloads."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from karpy.scheduling import volumes
from karpy_emulator import volumes as karpy_emulator_volumes


def _with_uid(body: dict[str, Any], uid: str) -> dict[str, Any]:
    body["metadata"]["uid"] = uid
    return body


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ({builders.ZONE_KEY: "us-east-1a"}, {builders.ZONE_KEY: "us-east-1a", builders.EBS_ZONE_KEY: "us-east-1a"}),
        ({"kubernetes.io/hostname": "n"}, {"kubernetes.io/hostname": "n"}),  # no zone, nothing to register
        (
            {builders.ZONE_KEY: "a", builders.EBS_ZONE_KEY: "x"},
            {builders.ZONE_KEY: "a", builders.EBS_ZONE_KEY: "x"},
        ),  # the node's own wins
    ],
)
def test_node_labels_add_the_csi_zone(node: dict[str, str], expected: dict[str, str]) -> None:
    assert karpy_emulator_volumes.node_labels(node) == expected


SNAP = karpy_emulator_volumes.snapshot(
    pvcs=[
        builders.pvc("bound-a", volume="pv-a"),
        builders.pvc("bound-ebs-a", volume="pv-ebs-a"),
        builders.pvc("wait-b", storage_class_name="only-b"),
        builders.pvc("wait-ebs-b", storage_class_name="only-ebs-b"),
        builders.pvc("wait-any"),
        builders.pvc("wait-default", storage_class_name=None),
    ],
    pvs=[builders.pv("pv-a", zone="a", claim="bound-a"), builders.pv("pv-ebs-a", zone="a", key=builders.EBS_ZONE_KEY)],
    storage_classes=[
        builders.storage_class("gp3", default=True),
        builders.storage_class("only-b", zones=["b"]),
        builders.storage_class("only-ebs-b", zones=["b"], key=builders.EBS_ZONE_KEY),
    ],
)


@pytest.mark.parametrize(
    ("claims", "zone", "expected"),
    [
        (("bound-a",), "a", ""),
        (("bound-a",), "b", karpy_emulator_volumes.NODE_AFFINITY_CONFLICT),
        (("bound-ebs-a",), "a", ""),  # keyed on the driver's label, matched through the CSI node label
        (("bound-ebs-a",), "b", karpy_emulator_volumes.NODE_AFFINITY_CONFLICT),
        (("wait-b",), "b", ""),
        (("wait-b",), "a", karpy_emulator_volumes.BIND_CONFLICT),
        (("wait-ebs-b",), "a", karpy_emulator_volumes.BIND_CONFLICT),
        (("wait-ebs-b",), "b", ""),
        (("wait-any",), "c", ""),  # no allowedTopologies: provisionable anywhere
        (
            ("wait-any", "bound-a"),
            "c",
            karpy_emulator_volumes.NODE_AFFINITY_CONFLICT,
        ),  # every claim must admit the node
        (("wait-b", "bound-a"), "a", karpy_emulator_volumes.BIND_CONFLICT),
        (("missing",), "a", ""),  # a PreFilter failure, reported for the pod, not per node
    ],
)
def test_node_conflict_is_volume_bindings_filter(claims: tuple[str, ...], zone: str, expected: str) -> None:
    node = karpy_emulator_volumes.node_labels({builders.ZONE_KEY: zone, "kubernetes.io/hostname": f"node-{zone}"})
    assert (
        karpy_emulator_volumes.node_conflict(builders.parsed_pod("app", cpu=None, claims=claims), node, SNAP.catalog)
        == expected
    )


def test_unbound_claims_are_those_without_a_volume_in_pod_order() -> None:
    got = karpy_emulator_volumes.unbound_claims(
        builders.parsed_pod("app", cpu=None, claims=["wait-b", "bound-a", "missing", "wait-any"]), SNAP
    )
    assert [c["metadata"]["name"] for c in got] == ["wait-b", "wait-any"]


def test_storage_class_of_falls_back_to_the_default_class() -> None:
    named = karpy_emulator_volumes.storage_class_of(SNAP.pvcs["default/wait-b"], SNAP)
    defaulted = karpy_emulator_volumes.storage_class_of(SNAP.pvcs["default/wait-default"], SNAP)
    assert named is not None
    assert named["metadata"]["name"] == "only-b"
    assert defaulted is not None
    assert defaulted["metadata"]["name"] == "gp3"
    no_default = karpy_emulator_volumes.snapshot(
        [builders.pvc("c", storage_class_name=None)], [], [builders.storage_class("gp3")]
    )
    assert karpy_emulator_volumes.storage_class_of(no_default.pvcs["default/c"], no_default) is None


def test_snapshot_leaves_out_objects_that_do_not_parse() -> None:
    broken = builders.pv("broken", zone="a")
    broken["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] = "Near"
    snap = karpy_emulator_volumes.snapshot([], [broken, builders.pv("fine", zone="a")], [])
    assert set(snap.pvs) == set(snap.catalog.pvs) == {"fine"}


def test_pv_manifest_is_the_claims_volume_pinned_to_the_zone() -> None:
    claim = _with_uid(builders.pvc("data-0", size="20Gi"), "1234")
    manifest = karpy_emulator_volumes.pv_manifest(claim, builders.storage_class("gp3"), zone="us-east-1b")
    assert manifest["metadata"]["name"] == "pvc-1234"  # external-provisioner's naming: pvc-<claim uid>
    assert manifest["metadata"]["annotations"] == {karpy_emulator_volumes.ANN_PROVISIONED_BY: "ebs.csi.aws.com"}
    spec = manifest["spec"]
    assert spec["capacity"] == {"storage": "20Gi"}
    assert spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["storageClassName"] == "gp3"
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"  # the class's, not the Delete default
    assert spec["csi"]["driver"] == "ebs.csi.aws.com"
    assert spec["csi"]["fsType"] == "xfs"
    assert spec["csi"]["volumeHandle"] == karpy_emulator_volumes.volume_handle("pvc-1234")
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "default",
        "name": "data-0",
        "uid": "1234",
    }
    # Read back as the controller reads PVs: the volume pins exactly that zone.
    assert volumes.pv_from_manifest(manifest).node_affinity == (volumes.zone_term("us-east-1b"),)


def test_pv_manifest_without_a_zone_has_no_node_affinity() -> None:
    manifest = karpy_emulator_volumes.pv_manifest(
        _with_uid(builders.pvc("c"), "9"), builders.storage_class("gp3"), zone=""
    )
    assert "nodeAffinity" not in manifest["spec"]
    assert volumes.pv_from_manifest(manifest).node_affinity == ()


def test_volume_handle_looks_like_an_ebs_volume_id_and_is_stable() -> None:
    handle = karpy_emulator_volumes.volume_handle("pvc-1")
    assert handle == karpy_emulator_volumes.volume_handle("pvc-1") != karpy_emulator_volumes.volume_handle("pvc-2")
    assert handle.startswith("vol-")
    assert len(handle) == 21
    assert int(handle[4:], 16) >= 0  # hexadecimal


def test_binding_payloads() -> None:
    patch = karpy_emulator_volumes.pvc_binding_patch("pvc-1", node="ip-1", driver="ebs.csi.aws.com")
    assert patch["spec"] == {"volumeName": "pvc-1"}
    assert patch["metadata"]["annotations"][karpy_emulator_volumes.ANN_SELECTED_NODE] == "ip-1"
    assert patch["metadata"]["annotations"][karpy_emulator_volumes.ANN_BIND_COMPLETED] == "yes"
    status = karpy_emulator_volumes.pvc_bound_status(
        {"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}
    )
    assert status == {"status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}}
