"""The client-side token bucket on a manual clock: burst first, then one request per 1/qps seconds, FIFO."""

from __future__ import annotations

import asyncio

import pytest

from karpy import clock
from karpy.kube import ratelimit


def test_burst_is_free_then_delays_grow_by_one_over_qps() -> None:
    manual = clock.ManualClock()
    bucket = ratelimit.TokenBucket(qps=10.0, burst=3, clock=manual)
    assert [bucket.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert [round(bucket.delay(), 6) for _ in range(3)] == [0.1, 0.2, 0.3]  # taken on credit, served in order


def test_tokens_refill_with_time_up_to_the_burst() -> None:
    manual = clock.ManualClock()
    bucket = ratelimit.TokenBucket(qps=2.0, burst=2, clock=manual)
    assert bucket.try_take()
    assert bucket.try_take()
    assert not bucket.try_take()
    manual.advance(0.5)  # one token at 2/s
    assert bucket.try_take()
    assert not bucket.try_take()
    manual.advance(3600)  # a long idle period refills only up to the burst
    assert [bucket.try_take() for _ in range(3)] == [True, True, False]


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_nonsense_limits_are_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="token bucket"):
        ratelimit.TokenBucket(qps, burst, clock=clock.ManualClock())


async def test_acquire_waits_on_the_injected_clock() -> None:
    manual = clock.ManualClock()
    bucket = ratelimit.TokenBucket(qps=1.0, burst=1, clock=manual)
    done: list[float] = []

    async def request() -> None:
        await bucket.acquire()
        done.append(manual.now())

    tasks = [asyncio.create_task(request()) for _ in range(3)]
    await manual.run_for(5)
    await asyncio.gather(*tasks)
    start = done[0]
    assert [t - start for t in done] == [0.0, 1.0, 2.0]
