"""The two small HTTP servers of the controller: /metrics and /explain/node/<name> (METRICS_PORT), and /healthz +
/readyz (HEALTH_PROBE_PORT).

Liveness answers as long as the event loop does; readiness asks the injected checks (informers synced, cloud
reachable, leader state known) and names the ones failing, as controller-runtime's healthz handler does.
Hand-written: upstream's chart probes /healthz and /readyz on one port and scrapes /metrics on another; Kopf's
liveness endpoint serves one path.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp.web

Check = Callable[[], bool | str]
"""A readiness check: True when ready, False when not, or the reason it is not (a non-empty string)."""


ExplainNode = Callable[[str], Awaitable[tuple[int, Mapping[str, Any]]]]
"""(node name) -> (HTTP status, JSON body): `explaining.node` bound to the controller."""


def metrics_app(
    scrape: Callable[[], Awaitable[bytes]], *, explain_node: ExplainNode | None = None
) -> aiohttp.web.Application:
    """/metrics (awaiting `scrape`: `Metrics.scrape`, which renders off the event loop), and
    `GET /explain/node/<name>` (the JSON of `karpy explain --node NAME -o json`) when given."""

    async def metrics(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(body=await scrape(), content_type="text/plain", charset="utf-8")

    app = aiohttp.web.Application()
    app.router.add_get("/metrics", metrics)
    if explain_node is not None:
        explain = explain_node

        async def node(request: aiohttp.web.Request) -> aiohttp.web.Response:
            status, body = await explain(request.match_info["name"])
            return aiohttp.web.json_response(body, status=status)

        app.router.add_get("/explain/node/{name}", node)
    return app


def failing(checks: Mapping[str, Check]) -> list[str]:
    """The lines of the checks that do not pass, controller-runtime's `[-]name failed`, with `: reason` when the
    check gave one (a check that raises fails)."""
    out: list[str] = []
    for name, check in checks.items():
        try:
            result = check()
        except Exception:  # a broken check must report not-ready, not crash the probe
            result = False
        if isinstance(result, str):
            out.append(f"[-]{name} failed: {result}" if result else f"[-]{name} failed")
        elif not result:
            out.append(f"[-]{name} failed")
    return out


def health_app(checks: Mapping[str, Check]) -> aiohttp.web.Application:
    async def healthz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        return aiohttp.web.Response(text="ok")

    async def readyz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        bad = failing(checks)
        if bad:
            return aiohttp.web.Response(status=503, text="\n".join([*bad, "readyz check failed"]))
        return aiohttp.web.Response(text="ok")

    app = aiohttp.web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@contextlib.asynccontextmanager
async def serving(app: aiohttp.web.Application, *, host: str, port: int) -> AsyncIterator[int]:
    """Serve `app` until the block ends; yields the bound port (pass 0 for a random one)."""
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = aiohttp.web.TCPSite(runner, host, port)
        await site.start()
        yield int(runner.addresses[0][1])
    finally:
        await runner.cleanup()
