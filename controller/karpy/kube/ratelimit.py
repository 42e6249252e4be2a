"""A token bucket on an injected clock: client-side QPS/burst towards the API server (client-go's flowcontrol).

Callers that find the bucket empty take a token "on credit" and sleep until it would have been refilled, so
concurrent callers are served in arrival order and none spins. Hand-written: nothing in Kopf or aiohttp limits
a client's request rate, and this one must sleep on the injected (virtual) clock.
"""

from __future__ import annotations

from karpy import clock as karpy_clock


class TokenBucket:
    def __init__(self, qps: float, burst: int, *, clock: karpy_clock.Clock) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs qps > 0 and burst >= 1 (got qps={qps}, burst={burst})")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock.now()

    def _refill(self) -> None:
        now = self._clock.now()
        self._tokens = min(float(self.burst), self._tokens + max(0.0, now - self._updated) * self.qps)
        self._updated = max(self._updated, now)

    def try_take(self) -> bool:
        """Take a token if one is there now (never waits)."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def delay(self) -> float:
        """Take a token on credit and return how long to wait before using it (0 when one was available)."""
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        wait = self.delay()
        if wait > 0:
            await self._clock.sleep(wait)
