"""The pod series measured from the provisioner's first sight and first placement of a pod (core:
controllers/metrics/pod/controller.go `provisioning_*`, controllers/state/metrics.go
`karpenter_pods_scheduling_decision_duration_seconds`): recorded by the provisioner and the watch observer on the
injected clock, observed when the pod's conditions turn True, and scraped as gauges while it waits."""

from __future__ import annotations

import functools
from typing import Any

from tests import builders
from tests.provisioning import builders as provisioning_builders
from tests.runtime import exporting
from tests.scheduling.conftest import fake_catalog

from karpy import clock, events, rejections
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, resources
from karpy.kube import fake as kube_fake
from karpy.provisioning import podtimes, provisioner
from karpy.runtime import metrics, observers
from karpy.state import cluster as state_cluster

START = 1_700_000_000.0  # 2023-11-14T22:13:20Z
DECISION = "karpenter_pods_scheduling_decision_duration_seconds"
WEB_POOL = builders.nodepool("web", requirements=[])


async def test_the_first_decision_on_each_pending_pod_is_timed_from_its_first_sight() -> None:
    m, manual = metrics.Metrics(), clock.ManualClock(START)
    pending = [builders.pod("fits", cpu="1"), builders.pod("too-big", cpu="1000")]
    state = provisioning_builders.state(manual, pools=[WEB_POOL], pending=pending)
    deps = provisioner.Deps(
        client=kube_fake.FakeKubeClient(manual), cluster=state,
        cloud=fake_provider.FakeCloudProvider(fake_catalog(8)), clock=manual,
        recorder=events.MemoryRecorder(), metrics=m.provisioner_hooks(),
        rejections=rejections.Discard(),
    )  # fmt: skip
    prov = provisioner.Provisioner(deps)
    for key in ("default/fits", "default/too-big"):
        prov.pod_times.seen(key)
    manual.advance(4.0)
    await prov.provision()
    assert exporting.samples(m, f"{DECISION}_count") == {(): 2.0}  # placed or not, each pod's first decision
    assert exporting.samples(m, f"{DECISION}_sum") == {(): 8.0}
    assert prov.pod_times.schedulable_since("default/fits") == START + 4.0
    assert prov.pod_times.schedulable_since("default/too-big") is None
    manual.advance(4.0)
    await prov.provision()
    assert exporting.samples(m, f"{DECISION}_count") == {(): 2.0}  # decided already: not observed again


def test_the_rescan_sees_pods_pending_since_before_this_replica_led() -> None:
    manual = clock.ManualClock(START)
    deps = provisioner.Deps(
        client=kube_fake.FakeKubeClient(manual),
        cluster=provisioning_builders.state(manual, pools=[WEB_POOL], pending=[builders.pod("old", cpu="1")]),
        cloud=fake_provider.FakeCloudProvider(fake_catalog(8)), clock=manual, recorder=events.MemoryRecorder(),
        rejections=rejections.Discard(),
    )  # fmt: skip
    prov = provisioner.Provisioner(deps)
    prov.pod_times.seen("default/deleted-while-following")  # its deletion event went to no listener of this replica
    prov._rescan_pending()
    assert prov.pod_times.seen_at("default/old") == START
    assert prov.pod_times.seen_at("default/deleted-while-following") is None


def _conditions(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    """A pod status with these (type, status, lastTransitionTime) conditions; False ones say Unschedulable."""
    return {
        "conditions": [
            builders.condition(t, s, lastTransitionTime=at, **({"reason": "Unschedulable"} if s == "False" else {}))
            for t, s, at in conditions
        ]
    }


_web = functools.partial(builders.pod, "web", uid="uid-web", created="2023-11-14T22:13:20Z")
"""The pod these tests follow, created at START."""

UNSCHEDULABLE = ("PodScheduled", "False", "2023-11-14T22:13:20Z")
BOUND = ("PodScheduled", "True", "2023-11-14T22:14:05Z")  # START + 45
READY = ("Ready", "True", "2023-11-14T22:15:00Z")  # START + 100
PENDING_WEB = _web(status=_conditions(UNSCHEDULABLE))
BOUND_WEB = _web(node="n1", status=_conditions(BOUND))
STARTED_WEB = _web(node="n1", phase="Running", status=_conditions(BOUND, READY))
FAILED_WEB = _web(phase="Failed", status=_conditions(UNSCHEDULABLE))


def _observer(times: podtimes.PodTimes, bound: list[float], started: list[float]) -> observers.Observer:
    return observers.Observer(
        observers.Hooks(
            trigger=lambda _key: None, nodeclaim_terminated=lambda _gone: None, node_created=lambda _p, _z: None,
            leading=lambda: True, pod_times=times, pod_provisioning_bound=bound.append,
            pod_provisioning_started=started.append,
        )
    )  # fmt: skip


def test_the_observer_sees_a_pending_pod_and_times_its_binding_and_start_from_its_placement() -> None:
    manual = clock.ManualClock(START + 5)
    times = podtimes.PodTimes(manual)
    bound: list[float] = []
    started: list[float] = []
    observe = _observer(times, bound, started)
    observe(resources.PODS, None, PENDING_WEB)
    assert times.seen_at("default/web") == START + 5  # the event that triggers the provisioner
    manual.advance(15.0)
    times.decided(failed=[], placed=["default/web"])  # placed at START + 20
    observe(resources.PODS, PENDING_WEB, BOUND_WEB)
    assert bound == [25.0]
    observe(resources.PODS, BOUND_WEB, STARTED_WEB)
    assert started == [80.0]
    assert len(times) == 0  # started: forgotten


def test_a_pod_never_placed_is_not_timed_and_a_deleted_one_is_forgotten() -> None:
    times = podtimes.PodTimes(clock.ManualClock(START))
    bound: list[float] = []
    observe = _observer(times, bound, [])
    observe(resources.PODS, None, PENDING_WEB)
    observe(resources.PODS, PENDING_WEB, BOUND_WEB)  # bound by someone else
    assert bound == []
    assert len(times) == 1
    observe(resources.PODS, BOUND_WEB, None)
    assert len(times) == 0


def test_an_ended_pod_is_forgotten() -> None:
    times = podtimes.PodTimes(clock.ManualClock(START))
    observe = _observer(times, [], [])
    observe(resources.PODS, None, PENDING_WEB)
    assert len(times) == 1
    observe(resources.PODS, PENDING_WEB, FAILED_WEB)
    assert len(times) == 0


def test_waiting_pods_are_scraped_from_first_sight_and_first_placement() -> None:
    manual = clock.ManualClock(START)
    state = state_cluster.Cluster(clock=manual)
    waiting = builders.unschedulable(builders.pod("waiting", uid="u-w", created="2023-11-14T22:13:20Z"))
    placed = builders.unschedulable(builders.pod("placed", uid="u-p", created="2023-11-14T22:13:20Z"))
    starting = builders.pod("starting", uid="u-s", node="n1", created="2023-11-14T22:13:20Z", phase="Pending")
    for obj in (waiting, placed, starting):
        state.apply(resources.PODS, client.WatchEvent(client.ADDED, obj))
    times = podtimes.PodTimes(manual)
    for key in ("default/waiting", "default/placed", "default/starting"):
        times.seen(key)
    manual.advance(10.0)
    times.decided(failed=[], placed=["default/placed", "default/starting"])
    m = metrics.Metrics()
    m.watch_cluster_series(state, now=lambda: START + 30.0, pod_times=times)
    assert exporting.samples(m, "karpenter_pods_provisioning_scheduling_undecided_time_seconds") == {
        (("name", "waiting"), ("namespace", "default")): 30.0
    }
    assert exporting.samples(m, "karpenter_pods_provisioning_unbound_time_seconds") == {
        (("name", "placed"), ("namespace", "default")): 20.0
    }
    assert exporting.samples(m, "karpenter_pods_provisioning_unstarted_time_seconds") == {
        (("name", "starting"), ("namespace", "default")): 20.0
    }
