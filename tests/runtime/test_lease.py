"""Leader election: the pure decision table, and two electors on the emulated API server with a ManualClock."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from tests import polling

from karpy import clock
from karpy.kube import resources, rest
from karpy.runtime import lease as runtime_lease
from karpy_emulator.apiserver import faults, runner

NAME, NS = "karpenter-leader-election", "kube-system"
NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("current", "observed_at", "now", "expected"),
    [
        (None, 0.0, NOW, runtime_lease.Action.CREATE),
        (runtime_lease.Record("me"), NOW - 100, NOW, runtime_lease.Action.RENEW),  # ours: renew even if stale
        (runtime_lease.Record("other", 15), NOW - 14.9, NOW, runtime_lease.Action.WAIT),  # live for another 0.1 s
        (
            runtime_lease.Record("other", 15),
            NOW - 15,
            NOW,
            runtime_lease.Action.TAKE,
        ),  # expired exactly at the duration
        (runtime_lease.Record("", 15), NOW, NOW, runtime_lease.Action.TAKE),  # released
    ],
)
def test_decide(
    current: runtime_lease.Record | None, observed_at: float, now: float, expected: runtime_lease.Action
) -> None:
    action, record = runtime_lease.decide(current, me="me", observed_at=observed_at, now=now)
    assert action is expected
    if expected is runtime_lease.Action.WAIT:
        assert record is None
    else:
        assert record is not None
        assert record.holder == "me"
        assert record.renew_time == runtime_lease.micro_time(now)


def test_take_counts_a_transition_and_renew_keeps_acquire_time() -> None:
    old = runtime_lease.Record("other", 15, "a", "b", transitions=3)
    _, taken = runtime_lease.decide(old, me="me", observed_at=0.0, now=NOW)
    assert taken is not None
    assert taken.transitions == 4
    assert taken.acquire_time == runtime_lease.micro_time(NOW)
    _, renewed = runtime_lease.decide(taken, me="me", observed_at=NOW, now=NOW + 10)
    assert renewed is not None
    assert renewed.acquire_time == taken.acquire_time
    assert renewed.transitions == 4


def test_micro_time_is_rfc3339_with_microseconds() -> None:
    assert runtime_lease.micro_time(0.5) == "1970-01-01T00:00:00.500000Z"


def electors(
    api: rest.RestClient, manual: clock.ManualClock
) -> tuple[runtime_lease.LeaderElector, runtime_lease.LeaderElector]:
    a, b = (
        runtime_lease.LeaderElector(api, name=NAME, namespace=NS, clock=manual, identity=f"karpy-{x}_uuid")
        for x in ("a", "b")
    )
    return a, b


async def test_one_leads_and_the_other_takes_over_only_after_renewals_stop(api: rest.RestClient) -> None:
    manual = clock.ManualClock(NOW)
    a, b = electors(api, manual)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert b.holder == a.identity
    assert b.deposed.is_set()
    assert a.elected.is_set()
    # the term's start: claims created before it may have been launched by an earlier leader (nodeclaim lifecycle)
    assert (a.leading_since(), b.leading_since()) == (NOW, float("inf"))
    # a renews every retry period for a minute: b never takes over, and there is never a second leader
    for _ in range(30):
        manual.advance(runtime_lease.RETRY_PERIOD)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
        assert a.is_leader()
        assert not b.is_leader()
    assert a.leading_since() == NOW  # renewals continue the term
    # a dies without releasing: b waits out the lease duration from when it last saw the record change
    manual.advance(runtime_lease.LEASE_DURATION - 0.5)
    assert not await b.try_acquire_or_renew()
    manual.advance(0.5)
    assert await b.try_acquire_or_renew()
    assert b.leading_since() == manual.now()
    lease = await api.get(resources.LEASES, NAME, namespace=NS)
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == b.identity
    assert lease["spec"]["leaseTransitions"] == 1
    # a paused a stopped claiming leadership on its own clock before b could take over: never two leaders
    assert not a.is_leader()
    assert b.is_leader()
    # when a comes back it sees b's lease and stays a follower instead of renewing over it
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader()
    assert b.is_leader()
    assert a.leading_since() == float("inf")


async def test_a_stale_write_loses_the_race(api: rest.RestClient) -> None:
    manual = clock.ManualClock(NOW)
    a, b = electors(api, manual)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    manual.advance(runtime_lease.LEASE_DURATION)
    # both see an expired lease; a third writer renews in between, so b's write carries a stale resourceVersion
    stale = await api.get(resources.LEASES, NAME, namespace=NS)
    assert stale is not None

    class Racing:
        """Returns the stale Lease on get, as if another replica wrote right after b read."""

        def __getattr__(self, name: str) -> object:
            return getattr(api, name)

        async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, object]:
            await api.patch(
                res, name, {"spec": {"renewTime": runtime_lease.micro_time(manual.now())}}, namespace=namespace
            )
            return dict(stale or {})

    racer = runtime_lease.LeaderElector(Racing(), name=NAME, namespace=NS, clock=manual, identity="c")  # type: ignore[arg-type]
    racer._observed, racer._observed_at = runtime_lease.Record.of(stale), NOW  # it has watched the lease since NOW
    assert not await racer.try_acquire_or_renew()
    assert not racer.is_leader()


async def test_clean_shutdown_releases_so_the_follower_takes_over_at_once(api: rest.RestClient) -> None:
    manual = clock.ManualClock(NOW)
    a, b = electors(api, manual)
    task = asyncio.create_task(a.run())
    await polling.until(a.is_leader)
    assert not await b.try_acquire_or_renew()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert not a.is_leader()
    assert await b.try_acquire_or_renew()  # no lease-duration wait after a release


async def test_a_renewal_whose_connection_drops_fails_the_round_not_the_elector(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    # A reset on the renewing PATCH (a write: the client does not send it again) is a failed round, as any API
    # error is (client-go leaderelection.go tryAcquireOrRenew): leadership holds until the renew deadline.
    manual = clock.ManualClock(NOW)
    a, _ = electors(api, manual)
    assert await a.try_acquire_or_renew()
    mix = faults.Mix(
        rate=1.0, users=frozenset({"t"}), kinds=frozenset({faults.Kind.RESET}), methods=frozenset({"PATCH"}), limit=1
    )
    layer = faults.Faults(mix)

    async def drop_the_next_write() -> None:
        kube.api.fault_layer = layer

    await asyncio.to_thread(kube.call, drop_the_next_write)
    manual.advance(runtime_lease.RETRY_PERIOD)
    assert not await a.try_acquire_or_renew()
    assert layer.hits == {faults.Kind.RESET: 1}
    assert a.is_leader()  # within the renew deadline
    manual.advance(runtime_lease.RETRY_PERIOD)
    assert await a.try_acquire_or_renew()
    assert a.is_leader()
