"""The running controller on the emulated API server with the fake cloud provider (no moto): the state cache routes
events to the work queues, the NodePool and EC2NodeClass controllers write status, leader election gates the loops,
and the HTTP endpoints answer. Each test runs `app.run` in its own loop task and stops it through the stop flag."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import aiohttp
import prometheus_client.parser
import pytest
from tests import builders, polling
from tests.operator import support

from karpy import clock, settings
from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import credentials, dryrun, resources, rest
from karpy.nodeclaim import expiration
from karpy.operator import app
from karpy.provisioning import provisioner
from karpy.runtime import leadership, lease, parts
from karpy.state import cluster as state_cluster
from karpy.wiring import graph
from karpy_emulator.apiserver import api_status, runner, server, validation

LEGACY = "test.karpy.dev/stored-under-an-older-crd"
_DISCOVERY = [{"tags": {"karpenter.sh/discovery": "test"}}]
NODECLASS = builders.ec2nodeclass(
    role="KarpenterNodeRole-test", subnetSelectorTerms=_DISCOVERY, securityGroupSelectorTerms=_DISCOVERY
)


class FakeNodeClasses:
    """The node-class half of a provider: every class resolves Ready (what AWSCloudProvider does on moto)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.finalized: list[str] = []

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus:
        ready = meta.Condition("Ready", "True", "Ready", "", self._now())
        return ec2nodeclass.EC2NodeClassStatus(instance_profile=f"profile-{nc.name}", conditions=(ready,))

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None:
        self.finalized.append(nc.name)


def legacy_admission() -> dict[str, validation.Validator]:
    """Admission as the real server, except for objects marked as stored under an older, laxer CRD."""
    validators = validation.karpenter()
    strict = validators[validation.NODEPOOLS]

    def nodepools(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[api_status.Cause]:
        if LEGACY in ((obj.get("metadata") or {}).get("annotations") or {}):
            return []
        return strict(obj, old)

    validators[validation.NODEPOOLS] = nodepools
    return validators


@pytest.fixture
async def kube() -> AsyncIterator[runner.KubeAPIRunner]:
    async with runner.KubeAPIRunner(server.FakeKubeAPI(seed=5, validators=legacy_admission())) as served:
        yield served


@pytest.fixture
async def api(kube: runner.KubeAPIRunner) -> AsyncIterator[rest.RestClient]:
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as c:
        yield c


@dataclasses.dataclass
class Running:
    ctrl: parts.Controller
    nodeclasses: FakeNodeClasses
    metrics_port: int = 0
    health_port: int = 0


def make_settings(**env: str) -> settings.Settings:
    return settings.Settings.from_env({"CLUSTER_NAME": "test", "BATCH_IDLE_DURATION": "100ms", **env})


@contextlib.asynccontextmanager
async def running(
    kube: runner.KubeAPIRunner, s: settings.Settings, *, identity: str = "karpy-0_test"
) -> AsyncIterator[Running]:
    cfg = credentials.Credentials(kube.url)
    wall = clock.SystemClock()
    nodeclasses = FakeNodeClasses(wall.now)

    def cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider(), nodeclasses=nodeclasses)

    async with rest.RestClient(cfg, clock=wall) as kube_client:
        ctrl = graph.build(s, kube=kube_client, clock=wall, cloud_factory=cloud, identity=identity, namespace="karpy")
        state = Running(ctrl, nodeclasses)
        bound = asyncio.Event()

        def on_bound(metrics_port: int, health_port: int) -> None:
            state.metrics_port, state.health_port = metrics_port, health_port
            bound.set()

        stop = asyncio.Event()
        task = asyncio.create_task(
            app.run(
                ctrl,
                stop=stop,
                endpoints=app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0),
                on_bound=on_bound,
            )
        )
        try:
            await bound.wait()
            yield state
        finally:
            stop.set()
            await task


async def test_nodepools_get_status_and_hashes_and_an_invalid_one_is_reported(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    async with running(kube, make_settings(DISABLE_LEADER_ELECTION="true")) as run:
        await api.create(resources.EC2NODECLASSES, NODECLASS)
        await api.create(resources.NODEPOOLS, builders.nodepool("good"))
        invalid = builders.nodepool("legacy", weight=500)  # the CRD allows 1..100
        invalid["metadata"]["annotations"] = {LEGACY: "true"}
        await api.create(resources.NODEPOOLS, invalid)

        async def good_ready() -> Mapping[str, Any] | None:
            """the valid NodePool is Ready with its hash annotations"""
            pool = await api.get(resources.NODEPOOLS, "good")
            return pool if support.condition(pool, "Ready").get("status") == "True" else None

        good = await polling.until(good_ready)
        assert support.condition(good, "ValidationSucceeded")["status"] == "True"
        assert support.condition(good, "NodeClassReady")["status"] == "True"
        annotations = good["metadata"]["annotations"]
        assert annotations[labels.ANNOTATION_NODEPOOL_HASH_VERSION] == labels.NODEPOOL_HASH_VERSION
        assert annotations[labels.ANNOTATION_NODEPOOL_HASH]
        assert good["status"]["nodes"] == 0

        async def legacy_reported() -> Mapping[str, Any] | None:
            """the invalid NodePool has ValidationSucceeded=False"""
            pool = await api.get(resources.NODEPOOLS, "legacy")
            return pool if support.condition(pool, "ValidationSucceeded").get("status") == "False" else None

        legacy = await polling.until(legacy_reported)
        validation_failed = support.condition(legacy, "ValidationSucceeded")
        assert validation_failed["reason"] == "NodePoolValidationFailed"
        assert "weight" in validation_failed["message"]
        assert support.condition(legacy, "Ready")["status"] == "False"
        assert labels.ANNOTATION_NODEPOOL_HASH not in (legacy["metadata"].get("annotations") or {})
        # the EC2NodeClass got our finalizer, its hash and the provider's status
        nc = await api.get(resources.EC2NODECLASSES, "default")
        assert nc is not None
        assert labels.FINALIZER_AWS_TERMINATION in nc["metadata"]["finalizers"]
        assert nc["status"]["instanceProfile"] == "profile-default"
        assert labels.ANNOTATION_EC2NODECLASS_HASH in nc["metadata"]["annotations"]
        # deleting the class runs finalize_nodeclass and releases the finalizer (no NodeClaim uses it)
        await api.delete(resources.EC2NODECLASSES, "default")

        async def nodeclass_gone() -> bool:
            """the EC2NodeClass finalizer was released"""
            return await api.get(resources.EC2NODECLASSES, "default") is None

        await polling.until(nodeclass_gone)
        assert run.nodeclasses.finalized == ["default"]
        # the pool follows: NodeClassReady=False once its class is gone
        await polling.until(lambda: _nodeclass_not_found(api))


async def _nodeclass_not_found(api: rest.RestClient) -> bool:
    """NodeClassReady turned False with NodeClassNotFound"""
    return (
        support.condition(await api.get(resources.NODEPOOLS, "good"), "NodeClassReady").get("reason")
        == "NodeClassNotFound"
    )


async def test_metrics_and_probes_answer_over_http(kube: runner.KubeAPIRunner, api: rest.RestClient) -> None:
    async with running(kube, make_settings(DISABLE_LEADER_ELECTION="true")) as run, aiohttp.ClientSession() as http:
        base_health = f"http://127.0.0.1:{run.health_port}"
        async with http.get(f"{base_health}/healthz") as response:
            assert response.status == 200

        async def ready() -> bool:
            """/readyz is 200 once the informers synced"""
            async with http.get(f"{base_health}/readyz") as response:
                return response.status == 200

        await polling.until(ready)
        await api.create(resources.NODEPOOLS, builders.nodepool("limited", limits={"cpu": "100"}))

        async def scraped() -> str:
            """the NodePool's limit shows on /metrics"""
            async with http.get(f"http://127.0.0.1:{run.metrics_port}/metrics") as response:
                text = await response.text()
            return text if 'karpenter_nodepools_limit{nodepool="limited",resource_type="cpu"} 100.0' in text else ""

        text = await polling.until(scraped)
        assert "karpenter_cluster_state_synced 1.0" in text
        assert "karpy_leader 1.0" in text
        assert "# TYPE karpenter_scheduler_scheduling_duration_seconds histogram" in text


async def test_readyz_names_the_failing_check(kube: runner.KubeAPIRunner, api: rest.RestClient) -> None:
    async with running(kube, make_settings(DISABLE_LEADER_ELECTION="true")) as run, aiohttp.ClientSession() as http:
        await api.create(resources.NODEPOOLS, builders.nodepool("any"))
        await polling.until(lambda: run.ctrl.queues[parts.NODEPOOLS].reconciled)
        run.ctrl.cluster.expect(resources.Resource("example.com", "v1", "never", "Never", False))  # never listed
        async with http.get(f"http://127.0.0.1:{run.health_port}/readyz") as response:
            assert response.status == 503
            assert "[-]informers failed" in await response.text()


async def test_only_the_leader_reconciles(kube: runner.KubeAPIRunner, api: rest.RestClient) -> None:
    # Another replica holds a live Lease: this one must keep its state warm but write nothing.
    holder = lease.LeaderElector(
        api, name="karpy-leader-election", namespace="karpy", clock=clock.SystemClock(), identity="other_replica"
    )
    assert await holder.try_acquire_or_renew()
    async with running(kube, make_settings()) as run:
        await api.create(resources.EC2NODECLASSES, NODECLASS)
        await api.create(resources.NODEPOOLS, builders.nodepool("waiting"))
        await api.create(resources.PODS, pending_pod("web-1", "1"))
        await api.patch(resources.PODS, "web-1", UNSCHEDULABLE, namespace="default", subresource="status")
        await polling.until(lambda: run.ctrl.cluster.synced() and run.ctrl.cluster.pending_pods())
        # A follower starts none of the leader's loops, so none can act (no waiting for something not to happen).
        assert not {t.get_name() for t in asyncio.all_tasks()} & set(leadership.singletons(run.ctrl))
        pool = await api.get(resources.NODEPOOLS, "waiting")
        assert pool is not None
        assert "status" not in pool or not support.condition(pool, "Ready")
        assert not run.ctrl.elector.is_leader()
        assert run.ctrl.queues[parts.NODEPOOLS].reconciled == 0
        assert (await api.list(resources.NODECLAIMS))[0] == []  # the follower's provisioner does not run
        assert "status" not in ((await api.get(resources.EC2NODECLASSES, "default")) or {})
        # the holder releases; this replica takes over and reconciles what it inherited
        await holder.release()

        async def reconciled() -> bool:
            """the new leader resolved the EC2NodeClass and wrote the NodePool status"""
            return support.condition(await api.get(resources.NODEPOOLS, "waiting"), "Ready").get("status") == "True"

        await polling.until(reconciled)
        assert run.ctrl.elector.is_leader()

        async def provisioned() -> bool:
            """the new leader's provisioner created a NodeClaim for the pending pod"""
            return bool((await api.list(resources.NODECLAIMS))[0])

        await polling.until(provisioned)


def test_bad_settings_exit_2_naming_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    from karpy.operator import main

    assert main.main({"CLUSTER_NAME": "test", "BATCH_MAX_DURATION": "soon"}) == main.EXIT_INVALID
    err = capsys.readouterr().err
    assert "BATCH_MAX_DURATION" in err
    assert "Traceback" not in err


class StubQueue:
    """An interruption queue that never has messages."""

    async def receive(self, *, wait_seconds: int = 20) -> list[Any]:
        return []

    async def delete(self, received: Any) -> None:
        return None


async def test_wiring_follows_the_settings() -> None:
    s = make_settings(DRY_RUN="true", DISABLE_LEADER_ELECTION="true", BATCH_MAX_DURATION="3s")
    inner = rest.RestClient(credentials.Credentials("http://127.0.0.1:1"), clock=clock.SystemClock())

    def cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider(), queue=StubQueue())

    ctrl = graph.build(s, kube=inner, clock=clock.ManualClock(), cloud_factory=cloud, identity="x")
    assert isinstance(ctrl.kube, dryrun.DryRunClient)  # every write of every reconciler is only logged
    assert isinstance(ctrl.elector, lease.AlwaysLeader)
    assert ctrl.interruption is not None  # a queue was configured
    assert ctrl.nodeclasses is None  # the fake has no node-class half: that controller is off
    assert set(leadership.singletons(ctrl)) == {
        "queue nodeclaims", "queue nodes", "queue nodepools", "provisioner", "disruption",
        "garbage collection", "prices", "interruption", "nodeclaim conditions", "expiration",
        "nodeclaim consistency",
    }  # fmt: skip
    assert ctrl.provisioner.batcher._settings.max_duration == 3.0


async def test_wiring_without_queue_or_dry_run_uses_the_client_and_elects() -> None:
    inner = rest.RestClient(credentials.Credentials("http://127.0.0.1:1"), clock=clock.SystemClock())

    def cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider())

    s = make_settings(LEADER_ELECTION_NAME="karpenter-leader-election")
    ctrl = graph.build(s, kube=inner, clock=clock.ManualClock(), cloud_factory=cloud, identity="x", namespace="ns")
    assert ctrl.kube is inner
    assert ctrl.interruption is None
    assert isinstance(ctrl.elector, lease.LeaderElector)
    assert (ctrl.elector.name, ctrl.elector.namespace) == ("karpenter-leader-election", "ns")


def pending_pod(name: str, cpu: str) -> dict[str, Any]:
    return builders.pod(name, cpu=cpu, memory="256Mi")


UNSCHEDULABLE = {
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes"}],
    }
}


async def test_a_pending_pod_gets_a_launched_nodeclaim(
    kube: runner.KubeAPIRunner, api: rest.RestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The singleton provisioner and the NodeClaim queue run under the app: pod → NodeClaim → launched."""
    # No periodic rescan during the test: a replacement can then only come from the deletion's trigger.
    monkeypatch.setattr(provisioner, "PENDING_RESCAN", 3600.0)
    async with running(kube, make_settings(DISABLE_LEADER_ELECTION="true")) as run:
        await api.create(resources.EC2NODECLASSES, NODECLASS)
        await api.create(resources.NODEPOOLS, builders.nodepool("default"))
        await api.create(resources.PODS, pending_pod("web-1", "1500m"))
        await api.patch(resources.PODS, "web-1", UNSCHEDULABLE, namespace="default", subresource="status")

        async def launched() -> list[dict[str, Any]]:
            """a NodeClaim for the pod exists and the fake provider launched it"""
            claims, _ = await api.list(resources.NODECLAIMS)
            return [c for c in claims if support.condition(c, "Launched").get("status") == "True"]

        claims = await polling.until(launched)
        assert len(claims) == 1
        claim = claims[0]
        assert claim["metadata"]["labels"][labels.LABEL_NODEPOOL] == "default"
        assert labels.FINALIZER_TERMINATION in claim["metadata"]["finalizers"]
        assert claim["status"]["providerID"]
        assert len(run.ctrl.cloud.provider.create_calls) == 1  # type: ignore[attr-defined]

        # Deleting it: the NodeClaim finalizer terminates the instance, releases, and the leader counts it.
        async def labelled() -> Mapping[str, str]:
            """the launch labelled the NodeClaim with its zone and capacity type (written after its status)"""
            current = await api.get(resources.NODECLAIMS, claim["metadata"]["name"])
            found = dict(((current or {}).get("metadata") or {}).get("labels") or {})
            return found if labels.LABEL_ZONE in found and labels.LABEL_CAPACITY_TYPE in found else {}

        claim_labels = await polling.until(labelled)
        await api.delete(resources.NODECLAIMS, claim["metadata"]["name"])

        async def replaced() -> list[dict[str, Any]]:
            """the still-pending pod got a new NodeClaim: the deletion triggered the provisioner (the periodic
            rescan that would find the pod without the trigger is off)"""
            claims, _ = await api.list(resources.NODECLAIMS)
            return [c for c in claims if c["metadata"]["name"] != claim["metadata"]["name"]]

        (replacement,) = await polling.until(replaced)
        assert replacement["metadata"]["labels"][labels.LABEL_NODEPOOL] == "default"

        async def gone() -> bool:
            """the NodeClaim's finalizer was released"""
            return await api.get(resources.NODECLAIMS, claim["metadata"]["name"]) is None

        await polling.until(gone)
        async with aiohttp.ClientSession() as http:

            async def scraped() -> str:
                """/metrics counts the terminated NodeClaim"""
                async with http.get(f"http://127.0.0.1:{run.metrics_port}/metrics") as response:
                    text = await response.text()
                return text if "karpenter_nodeclaims_terminated_total{" in text else ""

            text = await polling.until(scraped)
        ct, zone = claim_labels[labels.LABEL_CAPACITY_TYPE], claim_labels[labels.LABEL_ZONE]
        assert (
            f'karpenter_nodeclaims_terminated_total{{capacity_type="{ct}",nodepool="default",zone="{zone}"}} 1.0'
            in text
        )
        # operatorpkg's series, counted from the same watch: the claim's deletion was timed and its launch counted
        scraped_samples = {
            (s.name, s.labels.get("type"), s.labels.get("status"), s.labels.get("karpenter_sh_nodepool")): s.value
            for family in prometheus_client.parser.text_string_to_metric_families(text)
            for s in family.samples
        }
        assert scraped_samples[("operator_nodeclaim_termination_duration_seconds_count", None, None, "default")] == 1
        launched = ("operator_nodeclaim_status_condition_transitions_total", "Launched", "True", "default")
        assert scraped_samples[launched] >= 1


async def test_expired_nodeclaims_are_deleted_and_counted(
    kube: runner.KubeAPIRunner, api: rest.RestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The expiration and NodeClaim-conditions loops run under `karpy run` too."""
    # The loop's 10 s poll would be 10 s of wall clock idling here; a claim created after the loop's first pass is
    # then noticed within a second. Whether expiry waits for expireAfter is tests/nodeclaim's (on a ManualClock).
    monkeypatch.setattr(expiration, "POLL", 1.0)
    async with running(kube, make_settings(DISABLE_LEADER_ELECTION="true")) as run:
        await api.create(resources.EC2NODECLASSES, NODECLASS)
        pool = builders.nodepool("default")
        pool["spec"]["template"]["spec"]["expireAfter"] = "2s"
        await api.create(resources.NODEPOOLS, pool)
        await api.create(resources.PODS, pending_pod("web-1", "1"))
        await api.patch(resources.PODS, "web-1", UNSCHEDULABLE, namespace="default", subresource="status")

        async def first() -> str:
            """a NodeClaim was created for the pending pod"""
            claims, _ = await api.list(resources.NODECLAIMS)
            return str(claims[0]["metadata"]["name"]) if claims else ""

        name = await polling.until(first)

        async def expired() -> bool:
            """the first NodeClaim expired: it is being deleted (the expiry loop sees new claims within its poll)"""
            current = await api.get(resources.NODECLAIMS, name)
            return current is None or bool(current["metadata"].get("deletionTimestamp"))

        await polling.until(expired)
        async with aiohttp.ClientSession() as http:

            async def scraped() -> str:
                """/metrics counts the expiry as a disruption"""
                async with http.get(f"http://127.0.0.1:{run.metrics_port}/metrics") as response:
                    text = await response.text()
                return text if 'karpenter_nodeclaims_disrupted_total{capacity_type="' in text else ""

            text = await polling.until(scraped)
        assert 'nodepool="default",reason="expired",termination_mode="graceful"} ' in text


async def test_cancelling_run_stops_it_and_the_cancellation_goes_through(kube: runner.KubeAPIRunner) -> None:
    # The caller's own cancellation (the emulation's stop, a test's teardown) must not be swallowed on the way out.
    s = make_settings(DISABLE_LEADER_ELECTION="true")
    async with rest.RestClient(credentials.Credentials(kube.url), clock=clock.SystemClock()) as kube_client:
        ctrl = graph.build(
            s, kube=kube_client, clock=clock.SystemClock(), cloud_factory=support.fake_cloud, identity="x"
        )
        bound = asyncio.Event()
        local = app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0)
        task = asyncio.create_task(
            app.run(ctrl, stop=asyncio.Event(), endpoints=local, on_bound=lambda *_: bound.set())
        )
        await bound.wait()
        await polling.until(ctrl.cluster.synced)
        leader_loops = await polling.until(
            lambda: [t for t in asyncio.all_tasks() if t.get_name() in leadership.singletons(ctrl)]
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert task.cancelled()
    assert all(t.done() for t in leader_loops)  # and nothing it started outlives it
