"""Faults injected into a client set's AWS calls at the HTTP layer, for tests and the emulation (never wired by
`karpy run`): throttling, server errors, slow answers and lost answers, each on chosen operations.

A botocore `before-send` hook answers the request in place of the server, so everything above HTTP is the real
thing: the SDK parses the error as the service's own (EC2's XML, IAM's query XML, the JSON protocols' bodies), its
retry mode retries it, the call accounting counts each attempt, and the controller gets the error the SDK gives
up with. The request itself never reaches the server, as a throttled or failed request does not, except for a
*lost* answer: the server runs the request, and the caller gets a 500 in its place (the instance launched, the
caller does not know).

A *slow* answer is served by the server after `delay` seconds of the injected clock; on the emulation's
self-driving virtual clock the waiting worker thread does not count as work in flight (`Activity.waiting`), so the
delay passes without real time passing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import enum
import json
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, Final

from botocore import awsrequest, httpsession

from karpy import clock as karpy_clock
from karpy.cloudprovider.aws import clients


class Kind(enum.StrEnum):
    THROTTLED = "throttled"
    """The service's throttling error (EC2: RequestLimitExceeded)."""
    SERVER_ERROR = "server-error"
    """HTTP 500 (EC2: InternalError)."""
    UNAVAILABLE = "unavailable"
    """HTTP 503 (EC2: Unavailable)."""
    UNAUTHORIZED = "unauthorized"
    """The service refuses the caller (EC2: UnauthorizedOperation; never retried)."""
    SLOW = "slow"
    """The real answer, after `Rule.delay` seconds."""
    LOST = "lost"
    """The server runs the request; the caller gets an HTTP 500 instead of its answer."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    operations: frozenset[str]
    """"service:Operation" names ("ec2:CreateFleet"), or "service:*" for all of a service's."""
    kind: Kind
    times: int | None = None
    """Attempts it answers before it is spent; None = until removed."""
    delay: float = 0.0
    """Seconds of a SLOW answer."""

    def matches(self, service: str, operation: str) -> bool:
        return f"{service}:{operation}" in self.operations or f"{service}:*" in self.operations


@dataclasses.dataclass(frozen=True, slots=True)
class _Error:
    status: int
    code: str
    message: str


# By botocore protocol: how each service says "throttled", "internal error" and "unavailable".
_ERRORS: Final[dict[str, dict[Kind, _Error]]] = {
    "ec2": {
        Kind.THROTTLED: _Error(503, "RequestLimitExceeded", "Request limit exceeded."),
        Kind.SERVER_ERROR: _Error(500, "InternalError", "An internal error has occurred."),
        Kind.UNAVAILABLE: _Error(503, "Unavailable", "The server is overloaded."),
        Kind.UNAUTHORIZED: _Error(403, "UnauthorizedOperation", "You are not authorized to perform this operation."),
    },
    "query": {
        Kind.THROTTLED: _Error(400, "Throttling", "Rate exceeded"),
        Kind.SERVER_ERROR: _Error(500, "InternalFailure", "An internal error has occurred."),
        Kind.UNAVAILABLE: _Error(503, "ServiceUnavailable", "Service is unavailable."),
        Kind.UNAUTHORIZED: _Error(403, "AccessDenied", "User is not authorized to perform this action."),
    },
    "json": {
        Kind.THROTTLED: _Error(400, "ThrottlingException", "Rate exceeded"),
        Kind.SERVER_ERROR: _Error(500, "InternalFailure", "An internal error has occurred."),
        Kind.UNAVAILABLE: _Error(503, "ServiceUnavailable", "Service is unavailable."),
        Kind.UNAUTHORIZED: _Error(400, "AccessDeniedException", "User is not authorized to perform this action."),
    },
    "rest-json": {
        Kind.THROTTLED: _Error(429, "ThrottlingException", "Rate exceeded"),
        Kind.SERVER_ERROR: _Error(500, "InternalFailure", "An internal error has occurred."),
        Kind.UNAVAILABLE: _Error(503, "ServiceUnavailable", "Service is unavailable."),
        Kind.UNAUTHORIZED: _Error(403, "AccessDeniedException", "User is not authorized to perform this action."),
    },
}


class _Body:
    """The raw stream an `AWSResponse` reads its content from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def error_response(protocol: str, kind: Kind, *, url: str) -> awsrequest.AWSResponse:
    """The HTTP answer a service of `protocol` gives for `kind` (THROTTLED, SERVER_ERROR, UNAVAILABLE or
    UNAUTHORIZED)."""
    error = _ERRORS[protocol][kind]
    request_id = "karpy-injected-fault"
    headers: dict[str, str]
    if protocol == "ec2":
        body = (
            f"<Response><Errors><Error><Code>{error.code}</Code><Message>{error.message}</Message></Error>"
            f"</Errors><RequestID>{request_id}</RequestID></Response>"
        )
        headers = {"Content-Type": "text/xml"}
    elif protocol == "query":
        side = "Receiver" if error.status >= 500 else "Sender"
        body = (
            f"<ErrorResponse><Error><Type>{side}</Type><Code>{error.code}</Code><Message>{error.message}</Message>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        headers = {"Content-Type": "text/xml"}
    elif protocol == "json":
        body = json.dumps({"__type": error.code, "message": error.message})
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-RequestId": request_id}
    else:
        body = json.dumps({"message": error.message})
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": error.code, "x-amzn-RequestId": request_id}
    return awsrequest.AWSResponse(url, error.status, headers, _Body(body.encode()))


class Faults:
    """Rules over the calls of the client sets it is installed on; `hits` counts the attempts each kind answered.

    Thread-safe: the hooks run in the worker threads of the SDK calls."""

    def __init__(
        self,
        *,
        sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep,
        activity: karpy_clock.Activity = karpy_clock.UNTRACKED,
    ) -> None:
        self._sleep = sleep
        self._activity = activity
        self._lock = threading.Lock()
        self._rules: list[tuple[Rule, list[int | None]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: set[concurrent.futures.Future[None]] = set()
        self.hits: dict[tuple[str, str, Kind], int] = {}

    def install(self, aws: clients.Clients, *, answered_in_process: frozenset[str] = frozenset()) -> None:
        """Answer the calls of every client of `aws` by the rules (from the running event loop: slow answers
        wait on its clock). `answered_in_process` names calls a `before-call` hook answers without HTTP (the
        emulator's catalogue): their faults are given there, as the error the SDK would give up with."""
        self._loop = asyncio.get_running_loop()
        for client in (aws.ec2, aws.ssm, aws.iam, aws.eks, aws.sqs, aws.pricing):
            protocol = str(client.meta.service_model.protocol)
            client.meta.events.register("before-send", self._hook(protocol), unique_id="karpy-faults")
            service = str(client.meta.service_model.service_id.hyphenize())
            for name in answered_in_process:
                owner, _, operation = name.partition(":")
                if owner == service:
                    client.meta.events.register_first(
                        f"before-call.{service}.{operation}",
                        self._in_process_hook(protocol),
                        unique_id=f"karpy-faults-{name}",
                    )

    def add(self, rule: Rule) -> None:
        with self._lock:
            self._rules.append((rule, [rule.times]))

    def inject(self, operations: Iterable[str], kind: Kind, *, times: int | None = None, delay: float = 0.0) -> None:
        self.add(Rule(frozenset(operations), kind, times, delay))

    def clear(self) -> None:
        """Remove every rule: calls reach the server again, slow answers under way go out at once."""
        with self._lock:
            self._rules.clear()
            waiting = list(self._waiting)
        for future in waiting:
            future.cancel()

    def hit(self, kind: Kind | None = None) -> int:
        """Attempts answered so far (of `kind`, or of every kind)."""
        with self._lock:
            return sum(n for (_, _, k), n in self.hits.items() if kind is None or k is kind)

    def _take(self, service: str, operation: str) -> Rule | None:
        with self._lock:
            for rule, left in self._rules:
                if rule.matches(service, operation) and left[0] != 0:
                    if left[0] is not None:
                        left[0] -= 1
                    key = (service, operation, rule.kind)
                    self.hits[key] = self.hits.get(key, 0) + 1
                    return rule
        return None

    def _failing(self, event_name: str) -> Rule | None:
        """The rule that fails this call, None when none does: a slow rule is waited out here, and the call then
        goes on as usual. `event_name` is botocore's, e.g. "before-send.ec2.CreateFleet"."""
        _, service, operation = event_name.split(".", 2)
        rule = self._take(service, operation)
        if rule is not None and rule.kind is Kind.SLOW:
            self._wait(rule.delay)
            return None
        return rule

    def _hook(self, protocol: str) -> Callable[..., awsrequest.AWSResponse | None]:
        def before_send(request: awsrequest.AWSPreparedRequest, event_name: str, **unused: Any) -> Any:
            rule = self._failing(event_name)
            if rule is None:
                return None  # sent as usual
            if rule.kind is Kind.LOST:
                session = httpsession.URLLib3Session()
                try:
                    session.send(request)
                finally:
                    session.close()
                return error_response(protocol, Kind.SERVER_ERROR, url=request.url)
            return error_response(protocol, rule.kind, url=request.url)

        return before_send

    def _in_process_hook(self, protocol: str) -> Callable[..., tuple[awsrequest.AWSResponse, dict[str, Any]] | None]:
        def before_call(event_name: str, **unused: Any) -> tuple[awsrequest.AWSResponse, dict[str, Any]] | None:
            rule = self._failing(event_name)
            if rule is None:
                return None
            error = _ERRORS[protocol][Kind.SERVER_ERROR if rule.kind is Kind.LOST else rule.kind]
            parsed = {
                "Error": {"Code": error.code, "Message": error.message},
                "ResponseMetadata": {"HTTPStatusCode": error.status},
            }
            return awsrequest.AWSResponse("http://127.0.0.1/", error.status, {}, None), parsed

        return before_call

    def _wait(self, seconds: float) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("Faults.install was not called from the event loop")
        waiting = asyncio.run_coroutine_threadsafe(self._sleep(seconds), loop)
        with self._lock:
            self._waiting.add(waiting)
        try:
            with self._activity.waiting(), contextlib.suppress(concurrent.futures.CancelledError):
                waiting.result()  # cancelled by `clear`: the answer goes out now
        finally:
            with self._lock:
                self._waiting.discard(waiting)
