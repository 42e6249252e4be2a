"""The NodeOverlay controller against the emulated API server: it evaluates the overlays from the state cache,
swaps the result into the `Overlays` listings read, and writes ValidationSucceeded and Ready as upstream does
(core: pkg/controllers/nodeoverlay/controller.go): True, False `Conflict`, or False `RuntimeValidation` for an
overlay the API server stored but the controller refuses."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from karpy import clock
from karpy.api import labels, nodeoverlay
from karpy.cloudprovider import errors, overlay
from karpy.cloudprovider.fake import generator, provider
from karpy.kube import client as kube_client
from karpy.kube import resources, rest
from karpy.nodeoverlay import controller as nodeoverlay_controller
from karpy.runtime import workqueue
from karpy.state import cluster


def _overlay(name: str, key: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": nodeoverlay.API_VERSION,
        "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"requirements": [{"key": key, "operator": "Exists"}], **spec},
    }


def _verdict(obj: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


async def test_statuses_store_and_triggers(api: rest.RestClient) -> None:
    now = clock.ManualClock(1000.0)
    cache = cluster.Cluster(clock=now)
    cloud = provider.FakeCloudProvider([generator.new_instance_type("m5.large")])
    overlays = overlay.Overlays()
    controller = nodeoverlay_controller.NodeOverlayController(api, cache, cloud=cloud, overlays=overlays, clock=now)
    bodies = [
        (resources.NODEPOOLS, builders.nodepool()),
        (resources.NODEOVERLAYS, _overlay("a-loses", labels.LABEL_INSTANCE_TYPE, weight=3, price="1")),
        (resources.NODEOVERLAYS, _overlay("b-wins", labels.LABEL_INSTANCE_TYPE, weight=3, price="2")),
        # a key longer than a label allows: the API server stores it, the controller refuses it (RuntimeValidate)
        (resources.NODEOVERLAYS, _overlay("too-long", f"example.com/{'k' * 70}", price="3")),
    ]
    for res, body in bodies:
        cache.apply(res, kube_client.WatchEvent(kube_client.ADDED, await api.create(res, body)))
    pool = cache.nodepools()[0]
    with pytest.raises(errors.UnevaluatedNodePool):  # nothing is priced before the first evaluation
        overlays.apply(pool.name, await cloud.instance_types(pool))

    assert await controller.reconcile() == nodeoverlay_controller.RESYNC
    verdicts = {
        name: _verdict(await api.get(resources.NODEOVERLAYS, name)) for name in ("a-loses", "b-wins", "too-long")
    }
    assert verdicts["b-wins"] == {"ValidationSucceeded": ("True", "ValidationSucceeded"), "Ready": ("True", "Ready")}
    assert verdicts["a-loses"] == {"ValidationSucceeded": ("False", "Conflict"), "Ready": ("False", "Conflict")}
    assert verdicts["too-long"]["ValidationSucceeded"] == ("False", "RuntimeValidation")
    (priced,) = overlays.apply(pool.name, await cloud.instance_types(pool))
    assert {o.price for o in priced.offerings} == {2.0}

    # once the watch brings the statuses back, a second pass writes nothing: the resourceVersion stays
    for name in verdicts:
        stored = await api.get(resources.NODEOVERLAYS, name)
        cache.apply(resources.NODEOVERLAYS, kube_client.WatchEvent(kube_client.MODIFIED, stored or {}))
    before = (await api.get(resources.NODEOVERLAYS, "b-wins") or {})["metadata"]["resourceVersion"]
    now.advance(60)
    await controller.reconcile()
    assert (await api.get(resources.NODEOVERLAYS, "b-wins") or {})["metadata"]["resourceVersion"] == before

    queue = workqueue.WorkQueue("nodeoverlays", controller.reconcile, clock=now)
    cache.add_listener(controller.listener(queue.add))
    cache.apply(
        resources.PODS, kube_client.WatchEvent(kube_client.ADDED, {"metadata": {"name": "p", "namespace": "d"}})
    )
    assert len(queue) == 0
    cache.apply(resources.NODEOVERLAYS, kube_client.WatchEvent(kube_client.DELETED, {"metadata": {"name": "a-loses"}}))
    assert len(queue) == 1
