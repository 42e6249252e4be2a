"""Volume topology scenarios (core: scheduling/volumetopology.go) beyond a bound PV's zone and Immediate classes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy import requirements
from karpy.api import errors, labels
from karpy.scheduling import scheduler, volumes

WAIT = volumes.BINDING_WAIT


def _zones(*zones: str) -> requirements.Requirements:
    return requirements.Requirements([requirements.Requirement.in_(labels.LABEL_ZONE, zones)])


def test_wait_for_first_consumer_class_limits_zones_by_allowed_topologies() -> None:
    sc = volumes.StorageClass("regional", WAIT, (_zones("test-zone-1c"),))
    pvc = volumes.PersistentVolumeClaim("default", "data", storage_class_name="regional")
    pod = builders.parsed_pod("p", memory="1Gi", claims=["data"])
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], storage_classes=[sc]))
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert scheduling_conftest.zone_of(claim) == "test-zone-1c"


def test_pvc_without_class_uses_the_default_class() -> None:
    default = volumes.StorageClass("gp3", WAIT, (_zones("test-zone-1b"),), default=True)
    other = volumes.StorageClass("other", WAIT, (_zones("test-zone-1a"),))
    pvc = volumes.PersistentVolumeClaim("default", "data")
    res = scheduling_conftest.solve(
        [builders.parsed_pod("p", memory="1Gi", claims=["data"])],
        volumes=volumes.VolumeCatalog.build([pvc], storage_classes=[default, other]),
    )
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert scheduling_conftest.zone_of(claim) == "test-zone-1b"


@pytest.mark.parametrize("storage_class", [None, ""])
def test_unbound_pvc_without_a_class_blocks_the_pod(storage_class: str | None) -> None:
    # volumetopology.go "unbound pvc must define a storage class": unset with no default class, or explicitly ""
    # (which a default class does not override)
    default = volumes.StorageClass("gp3", WAIT, default=True)
    pvc = volumes.PersistentVolumeClaim("default", "data", storage_class_name=storage_class)
    pod = builders.parsed_pod("p", memory="1Gi", claims=["data"])
    classes = [default] if storage_class == "" else []
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], storage_classes=classes))
    assert "has no storage class" in res.unschedulable[pod.key]
    assert not res.new_nodeclaims


@pytest.mark.parametrize("source", [{"local": {"path": "/mnt/disk"}}, {"hostPath": {"path": "/data"}}])
def test_local_volume_hostname_term_is_ignored(source: dict[str, object]) -> None:
    # suite_test.go "should preserve unconstrained PV alternatives after ignoring hostname affinity"
    terms = [
        {"matchExpressions": [{"key": labels.LABEL_HOSTNAME, "operator": "In", "values": ["existing-host"]}]},
        {"matchExpressions": [{"key": labels.LABEL_ZONE, "operator": "In", "values": ["invalid-zone"]}]},
    ]
    pv = volumes.pv_from_manifest(
        {"metadata": {"name": "pv"}, "spec": {**source, "nodeAffinity": {"required": {"nodeSelectorTerms": terms}}}}
    )
    pvc = volumes.PersistentVolumeClaim("default", "data", volume_name="pv")
    pod = builders.parsed_pod("p", memory="1Gi", claims=["data"])
    scheduling_conftest.expect_scheduled(
        scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], [pv])), pod
    )
    # a network volume's hostname term still binds: no new node is that host
    pinned = dataclasses.replace(pv, node_local=False)
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], [pinned]))
    scheduling_conftest.expect_not_scheduled(res, pod)


@pytest.mark.parametrize(
    ("claim", "volume", "reason"),
    [
        (dict(deleting=True), {}, "is being deleted"),
        (dict(lost=True), {}, "is Lost"),
        (dict(bind_completed=False), {}, "lacks pv.kubernetes.io/bind-completed"),
        ({}, dict(deleting=True), "persistentvolume pv bound to default/data is being deleted"),
    ],
)
def test_claims_kube_scheduler_would_refuse_block_the_pod(
    claim: dict[str, bool], volume: dict[str, bool], reason: str
) -> None:
    # suite_test.go "should not launch nodes for pod with deleting persistentVolumeClaim / Lost
    # persistentVolumeClaim / bound persistentVolume that is marked for deletion", "should handle pods with PVCs with
    # defined volumeName (when pv.kubernetes.io/bind-completed is missing)"
    pvc = volumes.PersistentVolumeClaim("default", "data", volume_name="pv", **claim)
    pv = volumes.PersistentVolume("pv", **volume)
    pod = builders.parsed_pod("p", memory="1Gi", claims=["data"])
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], [pv]))
    assert reason in res.unschedulable[pod.key]


def test_claim_and_volume_manifests_carry_what_validation_reads() -> None:
    pvc = volumes.pvc_from_manifest(
        {
            "metadata": {"name": "d", "namespace": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"storageClassName": ""},
            "status": {"phase": "Lost"},
        }
    )
    assert (pvc.storage_class_name, pvc.deleting, pvc.lost, pvc.bind_completed) == ("", True, True, False)
    assert volumes.pvc_from_manifest({"metadata": {"name": "d"}, "spec": {}}).storage_class_name is None
    pv = volumes.pv_from_manifest({"metadata": {"name": "v"}, "spec": {"csi": {"driver": "ebs.csi.aws.com"}}})
    assert (pv.driver, pv.node_local, pv.deleting) == ("ebs.csi.aws.com", False, False)


@pytest.mark.parametrize(
    ("catalog", "reason"),
    [
        (volumes.VolumeCatalog(), "persistentvolumeclaim default/data not found"),
        (
            volumes.VolumeCatalog.build([volumes.PersistentVolumeClaim("default", "data", volume_name="pv-x")]),
            "persistentvolume pv-x bound to default/data not found",
        ),
        (
            volumes.VolumeCatalog.build([volumes.PersistentVolumeClaim("default", "data", storage_class_name="gone")]),
            "storageclass gone of persistentvolumeclaim default/data not found",
        ),
    ],
    ids=["missing-pvc", "missing-pv", "missing-class"],
)
def test_missing_volume_objects_are_named_in_the_reason(catalog: volumes.VolumeCatalog, reason: str) -> None:
    pod = builders.parsed_pod("p", memory="1Gi", claims=["data"])
    res = scheduling_conftest.solve([pod], volumes=catalog)
    assert res.unschedulable[pod.key] == reason


def test_two_volumes_in_different_zones_have_no_common_topology() -> None:
    pvs = [
        volumes.PersistentVolume("pv-a", (_zones("test-zone-1a"),)),
        volumes.PersistentVolume("pv-b", (_zones("test-zone-1b"),)),
    ]
    pvcs = [
        volumes.PersistentVolumeClaim("default", "a", volume_name="pv-a"),
        volumes.PersistentVolumeClaim("default", "b", volume_name="pv-b"),
    ]
    pod = builders.parsed_pod("p", memory="1Gi", claims=["a", "b"])
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build(pvcs, pvs))
    assert res.unschedulable[pod.key] == "volumes of default/p have no common topology"


def test_ored_pv_terms_intersect_with_the_other_volume() -> None:
    # pv-a may be in 1a or 1b (two ORed terms), pv-b only in 1b: the pod must land in 1b.
    pvs = [
        volumes.PersistentVolume("pv-a", (_zones("test-zone-1a"), _zones("test-zone-1b"))),
        volumes.PersistentVolume("pv-b", (_zones("test-zone-1b", "test-zone-1c"),)),
    ]
    pvcs = [
        volumes.PersistentVolumeClaim("default", "a", volume_name="pv-a"),
        volumes.PersistentVolumeClaim("default", "b", volume_name="pv-b"),
    ]
    res = scheduling_conftest.solve(
        [builders.parsed_pod("p", memory="1Gi", claims=["a", "b"])], volumes=volumes.VolumeCatalog.build(pvcs, pvs)
    )
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert scheduling_conftest.zone_of(claim) == "test-zone-1b"


def test_volume_zone_conflicting_with_node_selector_is_refused() -> None:
    pv = volumes.PersistentVolume("pv-1", (_zones("test-zone-1a"),))
    pvc = volumes.PersistentVolumeClaim("default", "data", volume_name="pv-1")
    pod = builders.parsed_pod(
        "p",
        nodeSelector={labels.LABEL_ZONE: "test-zone-1b"},
        volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
        memory="1Gi",
    )
    res = scheduling_conftest.solve([pod], volumes=volumes.VolumeCatalog.build([pvc], [pv]))
    assert "incompatible volume requirements" in res.unschedulable[pod.key]


def test_pods_sharing_a_zonal_volume_share_its_zone() -> None:
    pv = volumes.PersistentVolume("pv-1", (_zones("test-zone-1c"),))
    pvc = volumes.PersistentVolumeClaim("default", "shared", volume_name="pv-1")
    ps = [builders.parsed_pod(f"p-{i}", memory="1Gi", claims=["shared"]) for i in range(4)]
    res = scheduling_conftest.solve(ps, volumes=volumes.VolumeCatalog.build([pvc], [pv]))
    scheduling_conftest.expect_scheduled(res, *ps)
    assert {scheduling_conftest.zone_of(cl) for cl in res.new_nodeclaims} == {"test-zone-1c"}


def test_generic_ephemeral_volume_names_its_claim_after_the_pod() -> None:
    pod = builders.parsed_pod(
        "web", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}], memory="1Gi"
    )
    assert pod.pvc_names == ("web-scratch",)


def test_storage_class_manifest_parses_binding_mode_topologies_and_default() -> None:
    sc = volumes.storage_class_from_manifest(
        {
            "metadata": {"name": "gp3", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "volumeBindingMode": WAIT,
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": labels.LABEL_ZONE, "values": ["test-zone-1a", "test-zone-1b"]}]}
            ],
        }
    )
    assert sc == volumes.StorageClass("gp3", WAIT, (_zones("test-zone-1a", "test-zone-1b"),), default=True)


def test_bad_pv_affinity_names_the_field() -> None:
    bad = {
        "metadata": {"name": "pv"},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k"}]}]}}},
    }
    with pytest.raises(errors.ValidationError, match=r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]"):
        volumes.pv_from_manifest(bad)


def _big_node(volume_limits: Mapping[str, int]) -> scheduler.ExistingNode:
    """Node node-a of pool default in zone 1a: 64 cpu, 256Gi, 110 pods, and the CSI drivers' `volume_limits`."""
    zone_and_pool = {labels.LABEL_ZONE: "test-zone-1a", labels.LABEL_NODEPOOL: "default"}
    return builders.parsed_existing_node(
        "node-a", labels=zone_and_pool, cpu="64", memory="256Gi", volume_limits=volume_limits
    )


def test_csi_attach_limit_of_an_existing_node_is_honoured() -> None:
    # suite_test.go "should launch multiple nodes if required due to volume limits": the node's CSINode lets the
    # driver attach 10 volumes, so 5 of 6 pods with two claims each fit there and the sixth needs a new node
    sc = volumes.StorageClass("csi", WAIT, provisioner="fake.csi.provider")
    pvcs = [
        volumes.PersistentVolumeClaim("default", f"{ab}-{i}", storage_class_name="csi") for i in range(6) for ab in "ab"
    ]
    ps = [builders.parsed_pod(f"p-{i}", memory="1Gi", claims=[f"a-{i}", f"b-{i}"]) for i in range(6)]
    catalog = volumes.VolumeCatalog.build(pvcs, storage_classes=[sc])
    node = _big_node({"fake.csi.provider": 10})
    res = scheduling_conftest.solve(ps, volumes=catalog, existing_nodes=[node])
    scheduling_conftest.expect_scheduled(res, *ps)
    assert len(res.existing_nodes["node-a"]) == 5
    assert sum(len(cl.pods) for cl in scheduling_conftest.expect_provisioned(res, 1)) == 1
    # another driver's limit, or none, leaves every pod on the node
    for limits in ({"other.csi.provider": 1}, {}):
        res = scheduling_conftest.solve(ps, volumes=catalog, existing_nodes=[_big_node(limits)])
        assert len(res.existing_nodes["node-a"]) == 6


def test_pods_sharing_one_claim_attach_it_once() -> None:
    # suite_test.go "should launch a single node if all pods use the same PVC" (and in-tree EBS counts as the driver)
    pv = volumes.pv_from_manifest({"metadata": {"name": "pv"}, "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"}}})
    pvc = volumes.PersistentVolumeClaim("default", "shared", volume_name="pv")
    ps = [builders.parsed_pod(f"p-{i}", memory="1Gi", claims=["shared"]) for i in range(20)]
    node = _big_node({volumes.EBS_CSI_DRIVER: 1})
    res = scheduling_conftest.solve(ps, volumes=volumes.VolumeCatalog.build([pvc], [pv]), existing_nodes=[node])
    assert len(res.existing_nodes["node-a"]) == 20
    assert not res.new_nodeclaims


def test_attachments_resolve_the_driver_of_each_claim() -> None:
    classes = [
        volumes.StorageClass("intree", WAIT, provisioner="kubernetes.io/aws-ebs"),
        volumes.StorageClass("x", WAIT),
    ]
    pvcs = [
        volumes.PersistentVolumeClaim("default", "bound", volume_name="pv"),
        volumes.PersistentVolumeClaim("default", "intree", storage_class_name="intree"),
        volumes.PersistentVolumeClaim("default", "no-driver", storage_class_name="x"),
    ]
    pv = volumes.PersistentVolume("pv", driver="efs.csi.aws.com")
    pod = builders.parsed_pod("p", memory="1Gi", claims=["bound", "intree", "no-driver", "missing"])
    assert volumes.attachments(pod, volumes.VolumeCatalog.build(pvcs, [pv], classes)) == {
        "efs.csi.aws.com": frozenset({"default/bound"}),
        volumes.EBS_CSI_DRIVER: frozenset({"default/intree"}),
    }
