"""The emulated API server's own reading of a request and writing of its answer, for the requests it serves itself.

kmock parses every request for every purpose its DSL has: it decodes the body three times (as text, as JSON, as a
form when JSON fails, which every GET's empty body does), looks its resource up through a runtime protocol check and
its HTTP method twice through an enum search, and renders every answer by matching its payload against a dozen
kinds of content. A 10,000-pod run serves about a million requests, so that was a fifth of the API server's CPU.
`Parser` makes the same `kmock.Request` (kmock's request spy and `api.requests_of` see it as before) with one decode
of the body and the resources and methods it has met before; `rendered` answers a JSON payload (bytes or a dict) in
one step. The server uses them only while no test has declared a reaction of its own (`server.FakeKubeAPI.__call__`):
a test's reactions see kmock's own parse.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp.web
import kmock

from karpy_emulator.apiserver import kmock_private


class Parser:
    """`parse` with the resources and methods seen so far remembered (kmock's resources and methods are frozen)."""

    def __init__(self) -> None:
        self._resources: dict[tuple[str, str | None, str | None], kmock.resource] = {}
        self._methods: dict[str, kmock.method] = {}

    async def parse(self, raw: aiohttp.web.BaseRequest, *, id: int) -> kmock.Request:
        """What kmock's `Request._parse` makes of `raw`: the body read and decoded once, JSON or None."""
        body = await raw.read()
        text = body.decode(raw.charset or "utf-8") if body else ""
        data: Any = None
        if text:
            try:
                data = json.loads(text)
            except ValueError:  # kmock then tries a form, which no Kubernetes client sends
                data = None
        k8s = kmock_private.parse_path(raw.path)
        resource = None if k8s.group is None else self._resource(k8s.group, k8s.version, k8s.plural)
        method = self._methods.get(raw.method)
        if method is None:
            method = self._methods[raw.method] = kmock.method(raw.method)
        params = dict(raw.query)
        request: kmock.Request = kmock_private.Request(
            id=id,
            raw_request=raw,
            url=raw.url,
            method=method,
            params=params,
            headers=dict(raw.headers),
            cookies=dict(raw.cookies),
            data=data,
            body=body,
            text=text,
            action=kmock_private.guess_action(k8s, method, params),
            resource=resource,
            namespace=k8s.namespace,
            name=k8s.name,
            subresource=k8s.subresource,
        )
        return request

    def _resource(self, group: str, version: str | None, plural: str | None) -> kmock.resource:
        found = self._resources.get((group, version, plural))
        if found is None:
            found = kmock.resource(group=group, version=version, plural=plural)
            self._resources[group, version, plural] = found
        return found


def rendered(response: kmock_private.Response) -> aiohttp.web.Response | None:
    """`response` as aiohttp's answer when its payload is JSON (bytes or a dict), as kmock renders it; None for
    anything else (a watch's stream), which kmock renders."""
    payload = response.payload
    if isinstance(payload, bytes):
        body = payload
    elif isinstance(payload, dict):
        body = json.dumps(payload).encode()
    else:
        return None
    headers = {name: value for name, value in (response.headers or {}).items() if value is not None}
    return aiohttp.web.Response(body=body, status=response.status or 200, reason=response.reason, headers=headers)
