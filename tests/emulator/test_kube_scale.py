"""The NodePool `/scale` subresource of FakeKubeAPI (what `kubectl scale nodepool` uses), through the official
client: read, merge-patch and replace map onto `.spec.replicas`, `.status.nodes` is the observed count."""

from __future__ import annotations

import kubernetes
import pytest
from tests import builders

from karpy.api import labels

GROUP, VERSION, PLURAL = labels.GROUP, labels.VERSION, "nodepools"


def _create_static_pool(custom: kubernetes.client.CustomObjectsApi, replicas: int) -> None:
    """Create NodePool `static` of `replicas`, its status saying 2 nodes were observed."""
    body = builders.nodepool("static", requirements=[], replicas=replicas)
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, "static", {"status": {"nodes": 2}})


def test_scale_reads_replicas_and_observed_nodes(custom: kubernetes.client.CustomObjectsApi) -> None:
    _create_static_pool(custom, 3)
    scale = custom.get_cluster_custom_object_scale(GROUP, VERSION, PLURAL, "static")
    assert scale["kind"] == "Scale"
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"]["replicas"] == 2


def test_patching_the_scale_sets_spec_replicas(custom: kubernetes.client.CustomObjectsApi) -> None:
    _create_static_pool(custom, 3)
    answer = custom.patch_cluster_custom_object_scale(GROUP, VERSION, PLURAL, "static", {"spec": {"replicas": 5}})
    assert answer["spec"] == {"replicas": 5}
    pool = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "static")
    assert pool["spec"]["replicas"] == 5
    assert pool["status"]["nodes"] == 2  # the status is the controller's, untouched


def test_replacing_the_scale_checks_its_resource_version(custom: kubernetes.client.CustomObjectsApi) -> None:
    _create_static_pool(custom, 3)
    scale = custom.get_cluster_custom_object_scale(GROUP, VERSION, PLURAL, "static")
    scale["spec"]["replicas"] = 0
    custom.replace_cluster_custom_object_scale(GROUP, VERSION, PLURAL, "static", scale)
    assert custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "static")["spec"]["replicas"] == 0
    with pytest.raises(kubernetes.client.ApiException) as stale:
        custom.replace_cluster_custom_object_scale(GROUP, VERSION, PLURAL, "static", scale)  # old resourceVersion
    assert stale.value.status == 409


def test_a_negative_replica_count_is_refused(custom: kubernetes.client.CustomObjectsApi) -> None:
    _create_static_pool(custom, 1)
    with pytest.raises(kubernetes.client.ApiException) as refused:
        custom.patch_cluster_custom_object_scale(GROUP, VERSION, PLURAL, "static", {"spec": {"replicas": -1}})
    assert refused.value.status == 422
    assert custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "static")["spec"]["replicas"] == 1
