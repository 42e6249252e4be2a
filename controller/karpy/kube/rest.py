"""`RestClient`: the `KubeClient` protocol over aiohttp, with a client-side QPS/burst limit on an injected clock.

Hand-written because the official client is synchronous (a thread per call and per watch) and Kopf's async client
is private (`kopf._cogs.clients.api`). It authenticates with `credentials.Credentials` and, when the API server
answers 401, logs in again once (`relogin`: projected service-account tokens and `exec` plugin tokens expire) and
repeats the request, as client-go's refreshing transports and Kopf's vault do. A throttled (429) or failed (5xx
with Retry-After) request, and a read whose connection dropped, is sent again after a jittered wait on the injected
clock, as `retry` decides (client-go's rule, plus jitter).

Errors come back as `client.KubeError` subclasses built from the API server's `Status` body, and a request that
got no answer (refused, reset, timed out) as `client.Disconnected`: callers never see aiohttp's exceptions. Watches
are async generators over the JSON-lines stream; leaving the `async for` early (or cancelling the task) closes the HTTP
response, so no connection or task outlives its consumer (wrap in `contextlib.aclosing` when breaking out).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import ssl
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

import aiohttp

from karpy import clock as karpy_clock
from karpy.kube import client, credentials, ratelimit, resources, retry

log = logging.getLogger(__name__)

LIST_PAGE_SIZE = 500
"""Objects per LIST page: bounds the server's and our memory per response when the cluster has many pods."""
REQUEST_TIMEOUT = 30.0
"""Seconds for a non-watch request (connect + answer)."""
WATCH_READ_MARGIN = 30.0
"""Seconds a watch may stay silent beyond its timeoutSeconds before the client gives up on the connection."""
_MERGE_PATCH = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"


class RestClient:
    """Use as `async with RestClient(creds, clock=...) as kube:` (or call `close()`): it owns an aiohttp session."""

    def __init__(
        self,
        creds: credentials.Credentials,
        *,
        clock: karpy_clock.Clock,
        relogin: credentials.Login | None = None,
        qps: float = 200.0,
        burst: int = 300,
        page_size: int = LIST_PAGE_SIZE,
        activity: karpy_clock.Activity = karpy_clock.UNTRACKED,
        retries: retry.Policy = retry.DEFAULT,
        backoff_clock: karpy_clock.Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.credentials = creds
        """What requests authenticate with now (replaced by a re-login)."""
        self._relogin = relogin
        self._relogging = asyncio.Lock()
        self._clock = clock
        self._activity = activity
        self._limiter = ratelimit.TokenBucket(qps, burst, clock=clock)
        self._page_size = page_size
        self._session: aiohttp.ClientSession | None = None
        self._retries = retries
        self._backoff_clock = backoff_clock if backoff_clock is not None else clock
        """What retries wait on: the limiter's clock unless told (the emulation keeps its limiter on the wall clock
        and its retries on the virtual one)."""
        self._rng = rng if rng is not None else random.Random()
        self.retried = 0
        """Requests sent again after a throttle, a server error or a dropped connection (see `retry`)."""

    async def __aenter__(self) -> Self:
        self._ensure_session()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
                raise_for_status=False,
            )
        return self._session

    def _target(self, creds: credentials.Credentials, path: str, content_type: str = "") -> dict[str, Any]:
        """The URL, headers and TLS of one request with `creds` (per request: a re-login may change them)."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if creds.authorization:
            headers["Authorization"] = creds.authorization
        tls: ssl.SSLContext | bool = creds.ssl_context if creds.ssl_context is not None else True
        return {"url": f"{creds.server}{path}", "headers": headers, "ssl": tls}

    async def _renewed(self, refused: credentials.Credentials) -> bool:
        """Log in again after `refused` got a 401, unless a concurrent request already did: one login serves every
        request refused at once. False when there is no way to log in again."""
        if self._relogin is None:
            return False
        async with self._relogging:
            if self.credentials is refused:
                log.info("the API server refused the credentials (401); logging in again")
                self.credentials = await self._relogin()
        return True

    async def _backoff(self, wait: float, method: str, path: str, why: object) -> None:
        """Wait `wait` seconds before sending again, not as work in flight (virtual time may pass meanwhile)."""
        self.retried += 1
        log.info("%s %s: %s; sending it again in %.2f s", method, path, why, wait)
        with self._activity.waiting():
            await self._backoff_clock.sleep(wait)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        throttle_is_final: bool = False,
    ) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or text); raises nothing for HTTP errors (callers map them). Throttled,
        failed and dropped attempts are sent again as `retry` decides."""
        data = None if body is None else json.dumps(body)
        attempt = 0
        with self._activity.busy():
            while True:
                await self._limiter.acquire()
                try:
                    status, text, server_wait = await self._send(method, path, params, data, content_type)
                except _TRANSPORT_ERRORS as error:
                    wait = retry.after_disconnect(
                        self._retries, method=method, attempt=attempt, rng=self._rng, reset=_was_reset(error)
                    )
                    if wait is None:
                        raise _disconnected(method, path, error) from error
                    await self._backoff(wait, method, path, error)
                else:
                    wait = retry.after_answer(
                        self._retries,
                        method=method,
                        status=status,
                        server_wait=server_wait,
                        attempt=attempt,
                        rng=self._rng,
                        throttle_is_final=throttle_is_final,
                    )
                    if wait is None:
                        break
                    await self._backoff(wait, method, path, f"HTTP {status}")
                attempt += 1
        return status, _decoded(text)

    async def _send(
        self, method: str, path: str, params: Mapping[str, str] | None, data: str | None, content_type: str
    ) -> tuple[int, str, float | None]:
        """One attempt: (status, body text, Retry-After seconds), logging in again once after a 401."""
        session = self._ensure_session()
        for relogged in (False, True):  # once more after a 401 and a new login, not again after that
            creds = self.credentials
            target = self._target(creds, path, content_type if data is not None else "")
            async with session.request(method, params=params, data=data, **target) as response:
                text = await response.text()
                status = response.status
                server_wait = retry.retry_after(response.headers)
            if status != 401 or relogged or not await self._renewed(creds):
                break
        return status, text, server_wait

    async def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        status, payload = await self._request(method, path, **kwargs)
        if status >= 400:
            raise client.error_from_status(status, payload)
        return payload if isinstance(payload, dict) else {}

    # -- KubeClient ---------------------------------------------------------------------------------------------

    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        try:
            return await self._call("GET", res.path(name, namespace=namespace))
        except client.NotFound:
            return None

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        params = {"limit": str(self._page_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        items: list[dict[str, Any]] = []
        version = ""
        while True:
            page = await self._call("GET", res.path(namespace=namespace), params=params)
            metadata = page.get("metadata") or {}
            # Every page of a real API server carries the snapshot's version; watching from the first page's is
            # safe either way (later changes are replayed, and applying them twice is idempotent).
            version = version or str(metadata.get("resourceVersion") or "")
            items.extend(page.get("items") or ())
            token = metadata.get("continue")
            if not token:
                return items, version
            params["continue"] = str(token)

    async def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[client.WatchEvent]:
        params = {"watch": "true", "timeoutSeconds": str(timeout_seconds)}
        if resource_version:
            params["resourceVersion"] = resource_version
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=REQUEST_TIMEOUT, sock_read=timeout_seconds + WATCH_READ_MARGIN
        )
        path = res.path(namespace=namespace)
        async with contextlib.AsyncExitStack() as stack:
            # Opening the stream is a request in flight; once open, only the events that arrive are activity.
            with self._activity.busy():
                attempt = 0
                while True:
                    await self._limiter.acquire()
                    try:
                        resp = await self._open(stack, path, params, timeout)
                    except _TRANSPORT_ERRORS as error:
                        wait = retry.after_disconnect(
                            self._retries, method="GET", attempt=attempt, rng=self._rng, reset=_was_reset(error)
                        )
                        if wait is None:
                            raise _disconnected("GET", path, error) from error
                        await self._backoff(wait, "GET", path, error)
                        attempt += 1
                        continue
                    if resp.status < 400:
                        break
                    text = await resp.text()
                    wait = retry.after_answer(
                        self._retries,
                        method="GET",
                        status=resp.status,
                        server_wait=retry.retry_after(resp.headers),
                        attempt=attempt,
                        rng=self._rng,
                    )
                    if wait is None:
                        raise client.error_from_status(resp.status, _decoded(text))
                    resp.release()
                    await self._backoff(wait, "GET", path, f"HTTP {resp.status}")
                    attempt += 1
            try:
                async for line in _lines(resp.content):
                    self._activity.touch()
                    event = _decode_event(line)
                    if event is not None:
                        yield event
            except _TRANSPORT_ERRORS as error:  # the stream broke off (not the server ending it)
                raise _disconnected("WATCH", path, error) from error

    async def _open(
        self, stack: contextlib.AsyncExitStack, path: str, params: Mapping[str, str], limits: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        """One attempt to open a watch stream, logging in again once after a 401."""
        session = self._ensure_session()
        for relogged in (False, True):
            creds = self.credentials
            target = self._target(creds, path)
            resp = await stack.enter_async_context(session.get(params=params, timeout=limits, **target))
            if resp.status != 401 or relogged or not await self._renewed(creds):
                break
            resp.release()
        return resp

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        namespace = str((body.get("metadata") or {}).get("namespace") or "") if res.namespaced else ""
        if res.namespaced and not namespace:
            raise ValueError(f"creating a {res.kind} needs metadata.namespace")
        return await self._call("POST", res.path(namespace=namespace), body=dict(body))

    async def patch(
        self, res: resources.Resource, name: str, patch: client.Patch, *, namespace: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        if isinstance(patch, Mapping):
            body: Any = dict(patch)
            content_type = _MERGE_PATCH
        else:
            body = [dict(op) for op in patch]
            content_type = _JSON_PATCH
        path = res.path(name, namespace=namespace, subresource=subresource)
        return await self._call("PATCH", path, body=body, content_type=content_type)

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        try:
            await self._call("DELETE", res.path(name, namespace=namespace), body=options)
        except client.NotFound:
            return False
        return True

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        path = resources.PODS.path(name, namespace=namespace, subresource="eviction")
        # A 429 here is the budget's refusal, which the drain reads; it is not a throttle to wait out.
        status, payload = await self._request(
            "POST", path, body=client.eviction_body(namespace, name), throttle_is_final=True
        )
        outcome = client.eviction_outcome(status)
        if outcome is client.EvictionOutcome.FAILED:
            log.warning("eviction of pod %s/%s failed: %s", namespace, name, client.error_from_status(status, payload))
        return outcome

    async def bind(self, namespace: str, name: str, node: str) -> None:
        path = resources.PODS.path(name, namespace=namespace, subresource="binding")
        await self._call("POST", path, body=client.binding_body(namespace, name, node))


_TRANSPORT_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError)
"""What aiohttp raises when a request gets no (whole) answer: refused, reset, closed or timed out."""


def _was_reset(error: BaseException) -> bool:
    """The connection was made and then reset or closed before the answer; not refused, unresolved or timed out."""
    return not isinstance(error, aiohttp.ClientConnectorError | TimeoutError)


def _disconnected(method: str, path: str, error: BaseException) -> client.Disconnected:
    return client.Disconnected(f"{method} {path}: {type(error).__name__}: {error}")


def _decoded(text: str) -> Any:
    """A body as JSON, or as the text it is when it is not JSON (a proxy's error page), or None when empty."""
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return text


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Split a chunked body into lines without aiohttp's per-line size limit (large objects are one line)."""
    buffer = bytearray()
    async for chunk in stream.iter_any():
        buffer.extend(chunk)
        while (end := buffer.find(b"\n")) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            if line.strip():
                yield line
    if buffer.strip():
        yield bytes(buffer)


def _decode_event(line: bytes) -> client.WatchEvent | None:
    """One watch line as an event; ERROR raises its KubeError (410 Expired); BOOKMARKs and junk are skipped."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError:
        log.warning("skipping an undecodable watch line: %.200r", line)
        return None
    if not isinstance(raw, dict):
        return None
    kind, obj = raw.get("type"), raw.get("object")
    if kind == "ERROR":
        raise client.error_from_status(int((obj or {}).get("code") or 500), obj)
    if kind in (client.ADDED, client.MODIFIED, client.DELETED) and isinstance(obj, dict):
        return client.WatchEvent(str(kind), obj)
    return None
