"""Objects karpy cannot handle: each is reported where its owner looks, and only it is left alone.

One bad object must never stop a loop: the state cache, the work queues and the singleton loops (provisioning,
disruption, termination, interruption, garbage collection, status) hand such an object to `Rejections.report` and
go on with every other object in the same pass. A report is

* a Warning Event on the object (`kubectl describe` shows it; the recorder deduplicates and rate-limits it),
* one log line naming the object and the problem (for an object that does not parse: every bad field with its
  path), written again only when the problem changes,
* `karpy_objects_rejected_total{kind,reason}`, counted once per object and problem.

Nothing is done to a rejected object on the strength of what could not be read: no reconciler terminates,
deletes or disrupts it (or what it stands for: its instance, its node's pods). `accept` forgets an object once it
reads again, or is gone, so that a new problem is reported afresh.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

from karpy import events
from karpy.api import errors
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.kube import client, resources

log = logging.getLogger(__name__)

MESSAGE_LIMIT: Final = 1000
"""Characters of a problem kept for the Event and the log (a ValidationError lists every field; that is enough)."""
REMEMBERED: Final = 10_000
"""Distinct rejected objects remembered for deduplication (a cluster with more is past saving by logs)."""


class Reason(enum.StrEnum):
    """The `reason` label of `karpy_objects_rejected_total`."""

    INVALID = "invalid"
    """The object does not parse: a field the API server accepted (older or other CRDs, a core object from a
    misbehaving client) that karpy cannot read; the message names the field."""
    HANDLING_FAILED = "handling_failed"
    """Handling the object raised an error that is not an API server or cloud failure (a karpy bug, or a shape
    no one foresaw); the log line carries the traceback."""


EVENT_REASONS: Final = {Reason.INVALID: "InvalidObject", Reason.HANDLING_FAILED: "HandlingFailed"}
"""The Event reason for each rejection reason."""
OUTCOMES: Final = {Reason.INVALID: "leaves it alone until it changes", Reason.HANDLING_FAILED: "tries again later"}
"""What karpy does next, for the Event: an object that does not parse is read again when it changes; a failed
handling is retried (the work queue's backoff, or the loop's next pass)."""
TRANSIENT_STATUS: Final = frozenset({409, 429, 500, 502, 503, 504})
"""API server answers a later attempt may not meet: a conflict (a stale resourceVersion), throttling, a server or
gateway failure."""


def transient(exc: BaseException) -> bool:
    """Whether `exc` is a failure of the API server, the network or the cloud that a retry may not meet (the
    object is not at fault): it is retried with its own log line, never reported as a rejection."""
    if isinstance(exc, client.KubeError):
        return exc.status in TRANSIENT_STATUS
    return isinstance(exc, (OSError, TimeoutError, cloudprovider_errors.CloudProviderError))


class Sink(Protocol):
    """What reports go to: `Rejections`, or a test's recorder."""

    def report(
        self, obj: Mapping[str, Any], *, reason: Reason, problem: str, exc: BaseException | None = ...
    ) -> None: ...

    def accept(self, kind: str, key: str) -> None: ...


class Metrics:
    """What `Rejections` counts, by name; the operator's subclass binds it to karpy_objects_rejected_total, this one
    counts nothing."""

    def rejected(self, kind: str, reason: str) -> None:
        """Once per newly rejected object and problem."""


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


class Rejections:
    """Reports rejected objects once per problem: an Event on each, a log line and a counter."""

    def __init__(self, recorder: events.Recorder, *, metrics: Metrics | None = None) -> None:
        self._recorder = recorder
        self._metrics = metrics or Metrics()
        self._seen: dict[tuple[str, str], str] = {}  # (kind, key) -> the problem last reported

    def report(self, obj: Mapping[str, Any], *, reason: Reason, problem: str, exc: BaseException | None = None) -> None:
        kind = str(obj.get("kind") or "object")
        key = key_of(obj)
        problem = problem if len(problem) <= MESSAGE_LIMIT else f"{problem[:MESSAGE_LIMIT]}..."
        text = f"{reason}: {problem}"
        if self._seen.get((kind, key)) == text:
            return
        if len(self._seen) >= REMEMBERED:
            self._seen.pop(next(iter(self._seen)))
        self._seen[(kind, key)] = text
        self._metrics.rejected(kind, str(reason))
        what = "cannot read" if reason is Reason.INVALID else "failed handling"
        log.error(
            "%s %s %s and %s: %s",
            what,
            kind,
            key,
            OUTCOMES[reason],
            problem,
            extra={"kind": kind, "object": key, "reason": str(reason), "error": problem},
            exc_info=exc,
        )
        message = f"karpy {what} this {kind} and {OUTCOMES[reason]}: {problem}"
        self._recorder.record(obj, events.EventType.WARNING, EVENT_REASONS[reason], message)

    def accept(self, kind: str, key: str) -> None:
        self._seen.pop((kind, key), None)

    def rejected(self, kind: str) -> list[str]:
        """Keys of the `kind` objects currently rejected (for tests and debugging)."""
        return sorted(key for k, key in self._seen if k == kind)


@dataclasses.dataclass(frozen=True, slots=True)
class Reported:
    kind: str
    key: str
    reason: Reason
    problem: str


class MemorySink:
    """Keeps every report in order, for tests."""

    def __init__(self) -> None:
        self.reports: list[Reported] = []
        self.accepted: list[tuple[str, str]] = []

    def report(self, obj: Mapping[str, Any], *, reason: Reason, problem: str, exc: BaseException | None = None) -> None:
        self.reports.append(Reported(str(obj.get("kind") or "object"), key_of(obj), reason, problem))

    def accept(self, kind: str, key: str) -> None:
        self.accepted.append((kind, key))

    def keys(self, kind: str) -> list[str]:
        return [r.key for r in self.reports if r.kind == kind]


class Discard:
    """A sink that only logs, for graphs built without a recorder (tests, tools)."""

    def report(self, obj: Mapping[str, Any], *, reason: Reason, problem: str, exc: BaseException | None = None) -> None:
        log.warning("rejected %s %s (%s): %s", obj.get("kind"), key_of(obj), reason, problem[:MESSAGE_LIMIT])

    def accept(self, kind: str, key: str) -> None:
        return None


def about(res: resources.Resource, obj: Mapping[str, Any] | None = None, *, name: str = "") -> dict[str, Any]:
    """The object to report about: its kind from `res` (LIST items carry none), its identity from `obj` (read
    leniently: it may be the object that does not parse) or from `name` alone."""
    raw = obj.get("metadata") if obj is not None else None
    raw = raw if isinstance(raw, Mapping) else {}
    meta = {k: str(raw[k]) for k in ("name", "namespace", "uid") if isinstance(raw.get(k), str) and raw[k]}
    if name and "name" not in meta:
        meta["name"] = name
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": meta}


T = TypeVar("T")


def parse_or_report(
    parse: Callable[[Mapping[str, Any]], T], res: resources.Resource, raw: Mapping[str, Any], sink: Sink | None
) -> T | None:
    """`parse(raw)`, or None when the object does not parse. With a `sink`, a bad object is reported there (every
    bad field, reason INVALID) and a good one accepted (so a later problem is reported afresh); without one (a loop
    whose objects the state cache reports already) it is only logged at debug level."""
    try:
        parsed = parse(raw)
    except errors.ValidationError as error:
        if sink is None:
            log.debug("ignoring invalid %s (the state cache reports it): %s", res.kind.lower(), error)
        else:
            sink.report(about(res, raw), reason=Reason.INVALID, problem="; ".join(str(p) for p in error.problems))
        return None
    if sink is not None:
        sink.accept(res.kind, key_of(raw))
    return parsed
