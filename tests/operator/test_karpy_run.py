"""`karpy run` as the process runs it (`main.serve` → `app.run`) on the emulated API server over HTTP, fake cloud
provider: exactly one watch per watched resource and no other request than its LISTs and the Lease's, one more
watch each when the server ends every stream, and SIGTERM stops it in order."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterable

import pytest
from tests import polling
from tests.operator import support

from karpy import settings
from karpy.kube import credentials, resources, rest
from karpy.operator import app, main
from karpy.state import informer
from karpy_emulator.apiserver import audit, runner

USER = "karpy-controller"
"""The controller's bearer token: the emulated API server files its requests under it."""
LEASE_VERBS = {("get", "leases"), ("create", "leases"), ("patch", "leases")}
"""The leader election's requests (`karpy.runtime.lease`: it renews by a PATCH carrying the resourceVersion it read):
the only ones besides LISTs and watches on an empty cluster."""
WATCHED = {res.plural: 1 for res in informer.INFORMED}
LIVE_LISTS = {resources.NODECLAIMS.plural}
"""Listed live besides the informer's LIST: the leader's garbage collection reads NodeClaims from the API server at
each pass (`karpy.nodeclaim.controller.NodeClaimController.collect_garbage`), never through a watch."""


def tally(accesses: Iterable[audit.Access], verb: str) -> dict[str, int]:
    return dict(collections.Counter(a.resource for a in accesses if a.verb == verb))


def informer_lists(accesses: Iterable[audit.Access]) -> dict[str, int]:
    """LISTs per resource, those of LIVE_LISTS counted once (the informer's)."""
    return {plural: 1 if plural in LIVE_LISTS else count for plural, count in tally(accesses, "list").items()}


@pytest.fixture
async def karpy_run(kube: runner.KubeAPIRunner) -> AsyncIterator[tuple[asyncio.Task[None], asyncio.Event]]:
    """`karpy run` with its defaults (leader election on) until the test ends; the task and its stop flag."""
    s = settings.Settings.from_env({"CLUSTER_NAME": "test"})
    stop = asyncio.Event()
    local = app.Endpoints(host="127.0.0.1", metrics_port=0, health_port=0)
    creds = credentials.bearer(kube.url, USER)
    task = asyncio.create_task(
        main.serve(s, creds, environ={}, cloud_factory=support.fake_cloud, stop=stop, endpoints=local)
    )
    try:
        yield task, stop
    finally:
        stop.set()
        await task


def requests_until(kube: runner.KubeAPIRunner, check: Callable[[list[audit.Access]], bool]) -> Callable[[], object]:
    def probe() -> list[audit.Access] | None:
        seen = kube.api.requests_of(USER)
        return seen if check(seen) else None

    return probe


async def test_one_watch_per_resource_and_one_more_after_the_server_ends_them(
    kube: runner.KubeAPIRunner, karpy_run: tuple[asyncio.Task[None], asyncio.Event]
) -> None:
    def synced_and_leading(seen: list[audit.Access]) -> bool:
        """every informer listed and watches, and the Lease was taken"""
        leases = {(a.verb, a.resource) for a in seen if a.resource == "leases"}
        return set(tally(seen, "watch")) >= set(WATCHED) and ("create", "leases") in leases

    seen = await polling.until(requests_until(kube, synced_and_leading))
    assert tally(seen, "watch") == WATCHED  # no second stream of any resource: nothing but the informer watches
    assert informer_lists(seen) == WATCHED  # one LIST page each (the cluster is empty)
    assert {(a.verb, a.resource) for a in seen if a.verb not in ("watch", "list")} <= LEASE_VERBS

    # The API server ends every stream (its watch timeout, a restart): each informer resumes with one new watch
    # from the resourceVersion it saw, without a new LIST.
    await asyncio.to_thread(kube.call, kube.api.end_watches)
    # An informer whose stream ended empty waits a second before its next watch, so by the time all have resumed
    # any other watcher of a resource (a second stream, whenever it started) has been counted too.
    resumed = {plural: 2 for plural in WATCHED}
    seen = await polling.until(requests_until(kube, lambda seen: min(tally(seen, "watch").values()) >= 2))
    assert tally(seen, "watch") == resumed
    assert informer_lists(seen) == WATCHED
    assert {(a.verb, a.resource) for a in seen if a.verb not in ("watch", "list")} <= LEASE_VERBS


async def test_sigterm_stops_karpy_run_and_gives_the_lease_up(
    kube: runner.KubeAPIRunner, api: rest.RestClient, karpy_run: tuple[asyncio.Task[None], asyncio.Event]
) -> None:
    task, _ = karpy_run

    async def holder() -> str:
        """this replica holds the Lease"""
        lease = await api.get(resources.LEASES, "karpy-leader-election", namespace="default")
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    await polling.until(holder)
    os.kill(os.getpid(), signal.SIGTERM)
    await task  # ends by itself, without an error: the signal set the stop flag
    assert await holder() == ""  # released on the way out, so a follower takes over at once
