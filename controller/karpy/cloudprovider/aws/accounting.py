"""Count every AWS call the controller makes, by service and operation, from botocore's own event hooks.

EC2's API rate limits are per account and region and shared with everything else the customer runs, so what the
controller spends of them is worth a metric of its own. One `ApiCalls` is shared by every client of a
`clients.Clients` set (`install` registers its hooks on each client), so no call site can forget to count:

* a *call* is one SDK operation (one page of a paginated one), counted at `provide-client-params`, which botocore
  emits for every operation before anything can answer it, so calls answered in-process (the emulator's catalogue
  hooks, an injected fault) are counted as the controller made them;
* an *attempt* is one HTTP request of a call (`request-created`, once per try, before anything can answer it):
  what the rate limiter sees;
* an *error* is a call that failed after its retries, by error code (`after-call` with an HTTP error status, or
  `after-call-error` for a request that got no response at all).

Batchers report each batch here too (`record_batch`), so one object holds everything the operator exposes about
AWS traffic. Thread-safe: the hooks run in the worker threads that run the blocking SDK calls.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

CallKey = tuple[str, str]
"""(service, operation), e.g. ("ec2", "CreateFleet")."""
ErrorKey = tuple[str, str, str]
"""(service, operation, error code)."""

BATCH_SIZE_BUCKETS: Final[tuple[float, ...]] = (
    *(1, 2, 4, 5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 80, 90, 100, 125, 150, 175, 200),
    *(225, 250, 275, 300, 350, 400, 450, 500, 550, 600, 700, 800, 900, 1000),
)
"""Upper bounds of the batch-size histogram (aws: pkg/batcher/metrics.go `SizeBuckets`)."""
BATCH_TIME_BUCKETS: Final[tuple[float, ...]] = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0),
    *(1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0),
    *(40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0),
)
"""Upper bounds of the batch-window histogram (core: pkg/metrics/constants.go `DurationBuckets`)."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """A snapshot of one histogram: cumulative counts per upper bound (`+Inf` last), as Prometheus exposes them."""

    buckets: tuple[tuple[float, int], ...]
    total: float
    count: int


class _Histogram:
    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = tuple(bounds)
        self._counts = [0] * (len(self._bounds) + 1)
        self._total = 0.0

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, value)] += 1
        self._total += value

    def snapshot(self) -> Histogram:
        cumulative, running = [], 0
        for bound, count in zip((*self._bounds, float("inf")), self._counts, strict=True):
            running += count
            cumulative.append((bound, running))
        return Histogram(tuple(cumulative), self._total, running)


@dataclass(frozen=True, slots=True)
class BatchStats:
    """What one batcher did so far: how many requests each batch merged and how long its window stayed open."""

    sizes: Histogram
    window_seconds: Histogram


class ApiCalls:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[CallKey, int] = {}
        self._attempts: dict[CallKey, int] = {}
        self._errors: dict[ErrorKey, int] = {}
        self._batches: dict[str, tuple[_Histogram, _Histogram]] = {}
        self._launch_failures: dict[tuple[str, str, str, str], int] = {}
        self._termination_failures: dict[tuple[str, str], int] = {}
        self._userdata_bytes: dict[str, int] = {}

    def install(self, client: Any) -> None:
        """Count `client`'s calls here (its own event hooks: other clients of the same session are unaffected)."""
        events = client.meta.events
        events.register("provide-client-params", self._on_call, unique_id="karpy-count-calls")
        events.register("request-created", self._on_attempt, unique_id="karpy-count-attempts")
        events.register("after-call", self._on_result, unique_id="karpy-count-errors")
        events.register("after-call-error", self._on_exception, unique_id="karpy-count-exceptions")

    # --- botocore hooks (return None: they must never answer or change a call) --------------------------------

    def _on_call(self, model: Any, **_: Any) -> None:
        self._add(self._calls, _key(model))

    def _on_attempt(self, event_name: str, **_: Any) -> None:
        # request-created carries no operation model; its event name does ("request-created.ec2.CreateFleet").
        self._add(self._attempts, _from_event(event_name))

    def _on_result(self, http_response: Any, parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
        if http_response.status_code >= 300:
            code = str((parsed.get("Error") or {}).get("Code") or http_response.status_code)
            self._add(self._errors, (*_key(model), code))

    def _on_exception(self, exception: BaseException, event_name: str, **_: Any) -> None:
        self._add(self._errors, (*_from_event(event_name), type(exception).__name__))

    def _add(self, table: dict[Any, int], key: Any) -> None:
        with self._lock:
            table[key] = table.get(key, 0) + 1

    # --- batches ----------------------------------------------------------------------------------------------

    def record_batch(self, name: str, *, size: int, window_seconds: float) -> None:
        with self._lock:
            sizes, windows = self._batches.setdefault(
                name, (_Histogram(BATCH_SIZE_BUCKETS), _Histogram(BATCH_TIME_BUCKETS))
            )
            sizes.observe(size)
            windows.observe(window_seconds)

    # --- instance failures (karpenter_cloudprovider_instance_{launch,termination}_failures_total) ---------------

    def record_launch_failure(self, *, zone: str, zone_id: str, capacity_type: str, reason: str) -> None:
        """One error of a CreateFleet answer, for the override it names (aws: providers/instance/instance.go)."""
        self._add(self._launch_failures, (zone, zone_id, capacity_type, reason))

    def record_termination_failure(self, *, zone: str, zone_id: str) -> None:
        self._add(self._termination_failures, (zone, zone_id))

    def launch_failures(self) -> dict[tuple[str, str, str, str], int]:
        """(zone, zone id, capacity type, reason) -> failures."""
        with self._lock:
            return dict(self._launch_failures)

    def termination_failures(self) -> dict[tuple[str, str], int]:
        """(zone, zone id) -> failed TerminateInstances calls."""
        with self._lock:
            return dict(self._termination_failures)

    # --- rendered user data (karpenter_ec2nodeclasses_userdata_bytes) -------------------------------------------

    def record_userdata(self, nodeclass: str, size: int) -> None:
        """The user data rendered for `nodeclass`'s launch template, measured before CreateLaunchTemplate so an
        oversized rendering shows even though EC2 refuses it (aws: providers/launchtemplate/launchtemplate.go)."""
        with self._lock:
            self._userdata_bytes[nodeclass] = size

    def forget_userdata(self, nodeclass: str) -> None:
        """The node class is gone: its templates were deleted and nothing is rendered for it any more."""
        with self._lock:
            self._userdata_bytes.pop(nodeclass, None)

    def userdata_bytes(self) -> dict[str, int]:
        """EC2NodeClass name -> bytes of the user data last rendered for it (raw, before base64)."""
        with self._lock:
            return dict(self._userdata_bytes)

    # --- reading ----------------------------------------------------------------------------------------------

    def calls(self) -> dict[CallKey, int]:
        with self._lock:
            return dict(self._calls)

    def attempts(self) -> dict[CallKey, int]:
        with self._lock:
            return dict(self._attempts)

    def errors(self) -> dict[ErrorKey, int]:
        with self._lock:
            return dict(self._errors)

    def batches(self) -> dict[str, BatchStats]:
        with self._lock:
            return {name: BatchStats(s.snapshot(), w.snapshot()) for name, (s, w) in self._batches.items()}

    def total(self) -> int:
        with self._lock:
            return sum(self._calls.values())


def _key(model: Any) -> CallKey:
    return (str(model.service_model.service_id.hyphenize()), str(model.name))


def _from_event(event_name: str) -> CallKey:
    """("ec2", "CreateFleet") of "request-created.ec2.CreateFleet"."""
    _, service, operation = event_name.split(".", 2)
    return (service, operation)


def by_operation(calls: Mapping[CallKey, int]) -> dict[str, int]:
    """`{"ec2:CreateFleet": 3, ...}`, sorted, for reports."""
    return {f"{service}:{operation}": n for (service, operation), n in sorted(calls.items())}
