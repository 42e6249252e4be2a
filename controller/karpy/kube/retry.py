"""When `rest.RestClient` sends a request again, and after how long: a pure decision over one failed attempt.

client-go's rule (`rest/with_retry.go` `IsNextRetry`, `checkWait`, and `request.go`'s retryable errors) is the base:
an answer of 429, or of 5xx that carries `Retry-After`, is tried again after the seconds the server asked for, up to
10 retries; a connection reset or an unexpected EOF is tried again only on a GET (the server may have acted on a
write whose answer was lost). karpy adds two things client-go leaves to its opt-in backoff:

- **jitter**: a wait is never exactly what the server said or a fixed step; every replica and every request
  throttled at once would otherwise come back at once (the thundering herd the server just shed);
- **GETs without Retry-After**: a 5xx without the header or a reset connection on a read backs off
  exponentially (equal jitter: half the step fixed, half random), as a read repeated is harmless.

A write that failed with a 5xx without Retry-After, or lost its connection, is not sent again here: it may have
been applied, and only its caller knows whether sending it again is safe (a create with generateName is not).
The reconcilers' work queues retry those with their own backoff. An eviction's 429 is not retried either: it is
the PodDisruptionBudget's answer, which the drain reads (see `rest.RestClient.evict`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping

THROTTLED = 429


@dataclasses.dataclass(frozen=True, slots=True)
class Policy:
    max_retries: int = 10
    """Retries after the first attempt (client-go's default maxRetries)."""
    base: float = 0.5
    """Seconds of the first backoff step without Retry-After; each next retry doubles it."""
    cap: float = 30.0
    """Seconds no backoff step exceeds."""
    max_retry_after: float = 60.0
    """Seconds of Retry-After honoured; a server asking for longer gets its error passed on to the caller."""
    jitter: float = 0.2
    """Fraction of a Retry-After added at random on top of it."""


DEFAULT = Policy()
"""client-go's count, karpy's jitter."""
NO_RETRIES = Policy(max_retries=0)
"""Every failure goes straight to the caller."""


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The Retry-After header in seconds, or None when it is absent or not a number of seconds (client-go reads
    only whole seconds: `checkWait`)."""
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None
    return float(seconds) if seconds >= 0 else None


def _step(policy: Policy, attempt: int, rng: random.Random) -> float:
    step = min(policy.cap, policy.base * 2.0**attempt)
    return step / 2 + rng.uniform(0, step / 2)


def after_answer(
    policy: Policy,
    *,
    method: str,
    status: int,
    server_wait: float | None,
    attempt: int,
    rng: random.Random,
    throttle_is_final: bool = False,
) -> float | None:
    """Seconds to wait before sending again after an HTTP answer `status` to attempt number `attempt` (0 = the
    first), or None to hand the answer to the caller. `server_wait` is the parsed Retry-After."""
    if attempt >= policy.max_retries or status < 429 or (status == THROTTLED and throttle_is_final):
        return None
    if status != THROTTLED and status < 500:
        return None
    if server_wait is not None:
        if server_wait > policy.max_retry_after:
            return None
        return server_wait + rng.uniform(0, policy.jitter * server_wait) if server_wait > 0 else _step(policy, 0, rng)
    if status == THROTTLED or method == "GET":  # a 429 was refused before it was acted on; a GET is harmless
        return _step(policy, attempt, rng)
    return None


def after_disconnect(
    policy: Policy, *, method: str, attempt: int, rng: random.Random, reset: bool = True
) -> float | None:
    """Seconds to wait before sending again after the connection failed, or None to raise the error: only a GET,
    whose repetition cannot do anything twice, and only when the connection was `reset` or closed mid-answer
    (client-go's IsConnectionReset and IsProbableEOF): a refused connection or a timeout goes to the caller at once,
    so a client pointed at an unreachable server fails fast."""
    if attempt >= policy.max_retries or method != "GET" or not reset:
        return None
    return _step(policy, attempt, rng)
