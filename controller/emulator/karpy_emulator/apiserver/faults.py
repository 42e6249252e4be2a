"""API-server faults for chosen clients: a rate and a mix of the ways a loaded kube-apiserver fails, seeded.

`Faults` sits in front of `server.FakeKubeAPI` through two hooks (`FakeKubeAPI.fault_layer`): `before` sees every
request first and may answer it in place of the server, and `watch_stream` may cut a watch stream short. Only the
requests of the bearer tokens in `Mix.users` are hit (the controller's, `controlplane.CONTROLLER_USER`), so the
stand-ins and the test keep a reliable server and what a test checks afterwards is the controller's behaviour.

Of those requests, a fraction `Mix.rate` fails, each with one kind drawn from the kinds that apply to it:

| kind | what the client sees | applies to |
|---|---|---|
| `server-error` | HTTP 500 InternalError, the request not acted on | every request |
| `unavailable` | HTTP 503 ServiceUnavailable, no Retry-After | every request |
| `throttled` | HTTP 429 TooManyRequests with Retry-After (apiserver's max-in-flight and APF filters) | every request |
| `reset` | the connection closed without an answer, the request not acted on | every request |
| `slow` | the real answer after `Mix.slow_seconds` of the injected clock | every request but a watch |
| `watch-closed` | the watch stream ends after 0 to 3 more events, as on an apiserver restart | watches |
| `expired` | a watch resuming from a resourceVersion gets the ERROR event 410 Expired | watches with one |
| `conflict` | HTTP 409 Conflict, "the object has been modified" | updates and patches |

Whether a request fails is drawn from one `random.Random(Mix.seed)` in request order. Which kind it gets is not
drawn: each class of request (the kinds that apply to it) takes its kinds in turn, the kind only it can get first, so
the first fault of an update is a conflict and a resuming watch's first is a 410. A random choice left a kind that
applies to few requests unserved in some runs (which requests arrive first depends on how concurrent reconcilers
interleave), so a run could miss a fault class silently; in turn, every class that gets a few faults gets them all.

A slow answer waits on the emulation's clock (`sleep`), and on the self-driving virtual clock it is not work in
flight (`activity.waiting`), so the delay costs no real time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import random
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp.web
import kmock

from karpy import clock as karpy_clock
from karpy_emulator.apiserver import api_status, audit, kmock_private, watching


class Kind(enum.StrEnum):
    SERVER_ERROR = "server-error"
    UNAVAILABLE = "unavailable"
    THROTTLED = "throttled"
    RESET = "reset"
    SLOW = "slow"
    WATCH_CLOSED = "watch-closed"
    EXPIRED = "expired"
    CONFLICT = "conflict"


_ANSWERED = (Kind.SERVER_ERROR, Kind.UNAVAILABLE, Kind.THROTTLED, Kind.RESET)
"""Kinds that apply to every request."""
_MAX_EVENTS_BEFORE_CLOSE = 3
_DISCONNECT_POLL = 0.005
"""Real seconds between two looks at a slow answer's connection (shorter than the autojump clock's idle period)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Mix:
    rate: float
    """Fraction (0..1) of the chosen clients' requests that fail."""
    users: frozenset[str]
    """Bearer tokens (as sent, without "Bearer ") whose requests are hit; nobody else's are."""
    seed: int = 0
    kinds: frozenset[Kind] = frozenset(Kind)
    """The kinds to draw from (each request draws among those of them that apply to it, equally likely)."""
    retry_after: int = 1
    """Seconds a `throttled` answer asks the client to wait (the apiserver's own default is 1)."""
    slow_seconds: float = 2.0
    """Seconds a `slow` answer takes, on the injected clock."""
    limit: int | None = None
    """Faults served before the layer stops failing anything (None: no end)."""
    methods: frozenset[str] | None = None
    """HTTP methods whose requests are hit (None: all)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"a fault rate is a fraction between 0 and 1, got {self.rate}")
        if not self.kinds:
            raise ValueError("a fault mix needs at least one kind")


def applicable(request: kmock.Request, kinds: frozenset[Kind]) -> list[Kind]:
    """The kinds of `kinds` that can hit `request`, the most specific first (the order they are served in)."""
    found: list[Kind] = []
    if request.action == kmock.action.WATCH:
        if request.params.get("resourceVersion") not in (None, "", "0"):
            found.append(Kind.EXPIRED)
        found.append(Kind.WATCH_CLOSED)
    else:
        if request.method in ("PUT", "PATCH"):
            found.append(Kind.CONFLICT)
        found.append(Kind.SLOW)
    found.extend(_ANSWERED)
    return [kind for kind in found if kind in kinds]


def _status(code: int, reason: str, message: str, *, headers: dict[str, str] | None = None) -> aiohttp.web.Response:
    details = {"retryAfterSeconds": int(headers["Retry-After"])} if headers and "Retry-After" in headers else None
    return aiohttp.web.json_response(
        api_status.failure(code, reason, message, details=details), status=code, headers=headers
    )


class Faults:
    """The fault layer of one API server; `hits` counts the faults served, by kind. Runs on the server's loop."""

    def __init__(
        self,
        mix: Mix,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        activity: karpy_clock.Activity = karpy_clock.UNTRACKED,
    ) -> None:
        self.mix = mix
        self.enabled = True
        """Off: every request is served as if there were no fault layer (a test's clean-up phase)."""
        self.hits: collections.Counter[Kind] = collections.Counter()
        self._sleep = sleep
        self._activity = activity
        self._rng = random.Random(mix.seed)
        self._turns: collections.Counter[tuple[Kind, ...]] = collections.Counter()
        self._closing: set[int] = set()

    def _draw(self, request: kmock.Request) -> Kind | None:
        if not self.enabled or (self.mix.limit is not None and self.hits.total() >= self.mix.limit):
            return None
        if audit.user(request.headers) not in self.mix.users:
            return None
        if self.mix.methods is not None and request.method not in self.mix.methods:
            return None
        if request.resource is None or request.resource.plural is None:
            return None  # discovery: a client reads it once at start, and no controller loop depends on it
        if self._rng.random() >= self.mix.rate:
            return None
        kinds = tuple(applicable(request, self.mix.kinds))
        if not kinds:
            return None
        turn = self._turns[kinds]
        self._turns[kinds] += 1
        return kinds[turn % len(kinds)]

    async def before(self, request: kmock.Request) -> aiohttp.web.StreamResponse | None:
        """An answer in place of the server's, or None to serve `request` (after a slow answer's wait)."""
        kind = self._draw(request)
        if kind is None:
            return None
        self.hits[kind] += 1
        match kind:
            case Kind.SERVER_ERROR:
                return _status(500, "InternalError", "Internal error occurred: injected fault")
            case Kind.UNAVAILABLE:
                return _status(503, "ServiceUnavailable", "the server is currently unable to handle the request")
            case Kind.THROTTLED:
                retry = {"Retry-After": str(self.mix.retry_after)}
                return _status(429, "TooManyRequests", "Too many requests, please try again later.", headers=retry)
            case Kind.CONFLICT:
                why = "the object has been modified; please apply your changes to the latest version and try again"
                return _status(409, "Conflict", f"Operation cannot be fulfilled on {request.url.path}: {why}")
            case Kind.EXPIRED:
                line = watching.encode(watching.expired(str(request.params.get("resourceVersion")))) + b"\n"
                return aiohttp.web.Response(body=line, content_type="application/json")
            case Kind.RESET:
                transport = kmock_private.transport(request)
                if transport is not None:
                    transport.abort()
                return aiohttp.web.Response(status=500)  # never reaches the client: the connection is gone
            case Kind.WATCH_CLOSED:
                self._closing.add(id(request))
                return None
            case Kind.SLOW:
                await self._slow(request)
                return None

    async def _slow(self, request: kmock.Request) -> None:
        """Wait `slow_seconds` of the clock before serving `request`, not as work in flight: the client's request
        counts as in flight meanwhile, and this wait offsets it. A client that gives up (its task cancelled, its
        connection closed) ends the wait at once, so the offset never outlives the request it offsets: left in place,
        it would count some other request as idle, or hold the count below zero, which stops the clock."""
        transport = kmock_private.transport(request)
        with self._activity.waiting():
            sleeping = asyncio.ensure_future(self._sleep(self.mix.slow_seconds))
            try:
                while not sleeping.done():
                    await asyncio.wait([sleeping], timeout=_DISCONNECT_POLL)
                    if transport is None or transport.is_closing():
                        break
            finally:
                sleeping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sleeping

    def watch_stream(self, request: kmock.Request, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`stream`, or a copy of it that ends early when `before` chose to close this watch."""
        if id(request) not in self._closing:
            return stream
        self._closing.discard(id(request))
        return self._cut(stream, self._rng.randint(0, _MAX_EVENTS_BEFORE_CLOSE))

    @staticmethod
    async def _cut(stream: AsyncIterator[bytes], events: int) -> AsyncIterator[bytes]:
        async with contextlib.aclosing(stream) as lines:  # type: ignore[type-var]
            async for line in lines:
                yield line
                if line:  # the first, empty chunk only sends the headers
                    events -= 1
                    if events < 0:
                        return


def on_loop(clock: karpy_clock.Clock, loop: asyncio.AbstractEventLoop) -> Callable[[float], Awaitable[None]]:
    """A sleep on `clock` for the server's thread, when `clock`'s sleepers live on `loop` (the emulation's)."""

    async def sleep(seconds: float) -> None:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(clock.sleep(seconds), loop))

    return sleep
