"""The provisioner's in-flight, ignored-pod and effective-zone scheduler series (core: provisioning/scheduling/
metrics.go, provisioning/provisioner.go): a scrape taken while the solve runs in its worker thread shows that solve's
queue depth and unfinished work, and nothing once it ended; pods refused outright are counted; pending pods are
counted by effective zone, as of the last solve."""

from __future__ import annotations

from tests import builders
from tests.provisioning import builders as provisioning_builders
from tests.runtime import exporting
from tests.runtime import test_metrics_hooks as runtime_test_metrics_hooks
from tests.scheduling.conftest import ZONES, fake_catalog

from karpy import events, rejections
from karpy.api import labels
from karpy.clock import ManualClock
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client as kube_client
from karpy.kube import fake as kube_fake
from karpy.kube import resources
from karpy.provisioning import provisioner
from karpy.runtime import metrics
from karpy.scheduling import results, scheduler

DEPTH = "karpenter_scheduler_queue_depth"
UNFINISHED = "karpenter_scheduler_unfinished_work_seconds"
PENDING_BY_ZONE = "karpenter_scheduler_pending_pods_by_effective_zone_count"


async def test_a_solve_in_flight_shows_its_queue_and_work_and_nothing_after() -> None:
    m, manual = metrics.Metrics(), ManualClock(100.0)
    cluster = provisioning_builders.state(
        manual,
        pools=[builders.nodepool("web", requirements=[])],
        pending=[builders.pod("a", cpu="1", memory="1Gi"), builders.pod("b", cpu="1", memory="1Gi")],
    )
    m.registry.register(m.solves.collector(now=lambda: manual.now() + 7.0))  # scraped 7 s into the solve
    seen: list[str] = []

    def solver(inp: scheduler.SchedulingInput) -> results.Results:
        seen.append(m.exposition().decode())  # in the solve's worker thread, as a scrape would come
        return scheduler.solve(inp)

    deps = provisioner.Deps(
        client=kube_fake.FakeKubeClient(manual), cluster=cluster,
        cloud=fake_provider.FakeCloudProvider(fake_catalog(8)), clock=manual,
        recorder=events.MemoryRecorder(), metrics=m.provisioner_hooks(), solver=solver,
        rejections=rejections.Discard(),
    )  # fmt: skip
    await provisioner.Provisioner(deps).provision()
    (during,) = seen
    depth = [line for line in during.splitlines() if line.startswith(f'{DEPTH}{{controller="provisioner"')]
    unfinished = [line for line in during.splitlines() if line.startswith(f'{UNFINISHED}{{controller="provisioner"')]
    assert len(depth) == 1
    assert depth[0].endswith(" 2.0")
    assert unfinished[0].endswith(" 7.0")
    after = m.exposition().decode()
    assert f"{DEPTH}{{" not in after
    assert f"{UNFINISHED}{{" not in after


async def test_pods_refused_outright_are_counted() -> None:
    m = metrics.Metrics()
    dra = builders.pod(
        "claims-a-gpu", cpu="1", memory="1Gi", resourceClaims=[{"name": "gpu", "resourceClaimName": "a-gpu"}]
    )
    cluster = provisioning_builders.state(
        ManualClock(0.0),
        pools=[builders.nodepool("web", requirements=[])],
        pending=[dra, builders.pod("plain", cpu="1", memory="1Gi")],
    )
    deps = provisioner.Deps(
        client=kube_fake.FakeKubeClient(ManualClock(0.0)), cluster=cluster,
        cloud=fake_provider.FakeCloudProvider(fake_catalog(8)), clock=ManualClock(0.0),
        recorder=events.MemoryRecorder(), metrics=m.provisioner_hooks(),
        rejections=rejections.Discard(),
    )  # fmt: skip
    await provisioner.Provisioner(deps).provision()
    assert runtime_test_metrics_hooks.counter(m, "karpenter_scheduler_ignored_pods_count") == 1


async def test_pending_pods_by_effective_zone_are_the_last_solves_pending_pods() -> None:
    """Pods of a leaving node are in the solve but not pending (upstream counts Pending pods only); a zone the next
    solve has no pending pod in is dropped (upstream resets the series every solve)."""
    m, zone = metrics.Metrics(), labels.LABEL_ZONE
    first, second = ZONES[0], ZONES[1]
    moved = builders.ready(builders.pod("moved", node="old", cpu="1", memory="1Gi", nodeSelector={zone: first}))
    old = builders.node("old")
    later = builders.pod("later", cpu="1", memory="1Gi", nodeSelector={zone: second})
    cluster = provisioning_builders.state(
        ManualClock(0.0),
        pools=[builders.nodepool("web", requirements=[])],
        nodes=[old],
        pods=[moved],
        pending=[
            builders.pod("pinned", cpu="1", memory="1Gi", nodeSelector={zone: first}),
            builders.pod("free", cpu="1", memory="1Gi"),
        ],
    )
    cluster.mark_for_deletion("old")
    deps = provisioner.Deps(
        client=kube_fake.FakeKubeClient(ManualClock(0.0)), cluster=cluster,
        cloud=fake_provider.FakeCloudProvider(fake_catalog(8)), clock=ManualClock(0.0),
        recorder=events.MemoryRecorder(), metrics=m.provisioner_hooks(),
        rejections=rejections.Discard(),
    )  # fmt: skip
    prov = provisioner.Provisioner(deps)
    await prov.provision()
    by_zone = (("controller", "provisioner"), ("zone", first)), (("controller", "provisioner"), ("zone", "flexible"))
    assert exporting.samples(m, PENDING_BY_ZONE) == dict.fromkeys(by_zone, 1.0)
    for gone in (moved, old, builders.pod("pinned"), builders.pod("free")):
        res = resources.NODES if gone["kind"] == "Node" else resources.PODS
        cluster.apply(res, kube_client.WatchEvent(kube_client.DELETED, gone))
    cluster.apply(resources.PODS, kube_client.WatchEvent(kube_client.ADDED, builders.unschedulable(later)))
    await prov.provision()
    assert exporting.samples(m, PENDING_BY_ZONE) == {(("controller", "provisioner"), ("zone", second)): 1.0}
