"""`retry`: which failed attempts `RestClient` sends again and after how long (client-go's `rest/with_retry.go`
`IsNextRetry` and `checkWait`, plus jitter)."""

from __future__ import annotations

import random

import pytest

from karpy.kube import retry

POLICY = retry.Policy()


def answer(method: str, status: int, server_wait: float | None, *, attempt: int = 0, seed: int = 1) -> float | None:
    return retry.after_answer(
        POLICY, method=method, status=status, server_wait=server_wait, attempt=attempt, rng=random.Random(seed)
    )


@pytest.mark.parametrize(
    ("method", "status", "server_wait", "retried"),
    [
        # client-go checkWait: a 429 or a 5xx with Retry-After is retried whatever the verb (not acted on).
        ("POST", 429, 3.0, True),
        ("PATCH", 503, 2.0, True),
        ("DELETE", 500, 1.0, True),
        # A 429 without the header was still refused before it was acted on.
        ("PATCH", 429, None, True),
        # A write's 5xx without Retry-After may have been applied: its caller decides.
        ("POST", 500, None, False),
        ("PATCH", 503, None, False),
        ("PUT", 502, None, False),
        # A read is harmless to repeat.
        ("GET", 500, None, True),
        ("GET", 503, None, True),
        # Everything else is the caller's answer.
        ("GET", 404, None, False),
        ("PATCH", 409, None, False),
        ("GET", 410, None, False),
        ("POST", 422, None, False),
        ("GET", 200, None, False),
        ("PATCH", 409, 5.0, False),
    ],
)
def test_which_answers_are_sent_again(method: str, status: int, server_wait: float | None, retried: bool) -> None:
    assert (answer(method, status, server_wait) is not None) == retried


def test_retry_after_is_honoured_with_jitter_on_top() -> None:
    waits = {answer("PATCH", 429, 10.0, seed=seed) for seed in range(50)}
    assert all(10.0 <= wait <= 10.0 * (1 + POLICY.jitter) for wait in waits if wait is not None)
    assert len(waits) == 50  # jittered: no two seeds wait the same


def test_a_retry_after_beyond_the_cap_goes_to_the_caller() -> None:
    assert answer("GET", 503, POLICY.max_retry_after + 1) is None
    assert answer("GET", 503, POLICY.max_retry_after) is not None


def test_backoff_without_retry_after_doubles_with_equal_jitter_up_to_the_cap() -> None:
    for attempt in range(POLICY.max_retries):
        step = min(POLICY.cap, POLICY.base * 2**attempt)
        waits = [answer("GET", 500, None, attempt=attempt, seed=seed) for seed in range(20)]
        assert all(wait is not None and step / 2 <= wait <= step for wait in waits), (attempt, waits)
        assert len(set(waits)) == 20


def test_retries_stop_after_max_retries() -> None:
    assert answer("GET", 500, None, attempt=POLICY.max_retries - 1) is not None
    assert answer("GET", 500, None, attempt=POLICY.max_retries) is None
    assert answer("POST", 429, 1.0, attempt=POLICY.max_retries) is None
    assert (
        retry.after_answer(retry.NO_RETRIES, method="GET", status=503, server_wait=1.0, attempt=0, rng=random.Random())
        is None
    )


def test_a_throttle_that_is_final_is_not_retried() -> None:
    # The Eviction API's 429 is a PodDisruptionBudget's refusal (with Retry-After on a real API server).
    kwargs = {"method": "POST", "status": 429, "server_wait": 10.0, "attempt": 0, "rng": random.Random(1)}
    assert retry.after_answer(POLICY, throttle_is_final=True, **kwargs) is None  # type: ignore[arg-type]
    assert retry.after_answer(POLICY, throttle_is_final=False, **kwargs) is not None  # type: ignore[arg-type]


def test_a_dropped_connection_is_retried_only_on_a_read() -> None:
    rng = random.Random(3)
    assert retry.after_disconnect(POLICY, method="GET", attempt=0, rng=rng) is not None
    for method in ("POST", "PATCH", "PUT", "DELETE"):
        assert retry.after_disconnect(POLICY, method=method, attempt=0, rng=rng) is None
    assert retry.after_disconnect(POLICY, method="GET", attempt=POLICY.max_retries, rng=rng) is None


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), (" 0 ", 0.0), ("-1", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None), ("1.5", None)],
)
def test_retry_after_reads_whole_seconds(header: str, seconds: float | None) -> None:
    assert retry.retry_after({"Retry-After": header}) == seconds
    assert retry.retry_after({}) is None


def test_a_refused_or_timed_out_connection_is_not_retried() -> None:
    # client-go retries only a reset or an unexpected EOF: a client pointed at a server that is not there fails fast.
    rng = random.Random(4)
    assert retry.after_disconnect(POLICY, method="GET", attempt=0, rng=rng, reset=False) is None
    assert retry.after_disconnect(POLICY, method="GET", attempt=0, rng=rng, reset=True) is not None
