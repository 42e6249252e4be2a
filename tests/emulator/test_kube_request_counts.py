"""The emulated API server's `/metrics`: kube-apiserver's `apiserver_request_total`, one sample per label set, read
with prometheus_client's own parser (what a scraper and bench/performance.py read it with)."""

from __future__ import annotations

import aiohttp
from prometheus_client import parser

from karpy_emulator.apiserver import runner

PODS = "/api/v1/namespaces/default/pods"


async def _scraped(session: aiohttp.ClientSession, url: str) -> dict[tuple[str, ...], float]:
    async with session.get(f"{url}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    counted: dict[tuple[str, ...], float] = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            assert sample.name == "apiserver_request_total"
            got = sample.labels
            key = (got["verb"], got["resource"], got["subresource"], got["scope"], got["code"])
            counted[key] = sample.value
    return counted


async def test_each_request_is_counted_by_verb_resource_subresource_scope_and_code() -> None:
    async with runner.KubeAPIRunner() as kube, aiohttp.ClientSession() as session:
        assert await _scraped(session, kube.url) == {}
        async with session.post(f"{kube.url}{PODS}", json={"metadata": {"name": "p1"}}) as created:
            assert created.status == 201
        for _ in range(2):
            async with session.get(f"{kube.url}{PODS}/p1") as got:
                assert got.status == 200
        async with session.get(f"{kube.url}{PODS}/ghost") as missing:
            assert missing.status == 404
        patch = {"status": {"phase": "Running"}}
        headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(f"{kube.url}{PODS}/p1/status", json=patch, headers=headers) as patched:
            assert patched.status == 200
        async with session.get(f"{kube.url}/api/v1/pods") as listed:
            assert listed.status == 200
        assert await _scraped(session, kube.url) == {
            ("POST", "pods", "", "namespace", "201"): 1,
            ("GET", "pods", "", "resource", "200"): 2,
            ("GET", "pods", "", "resource", "404"): 1,
            ("PATCH", "pods", "status", "resource", "200"): 1,
            ("LIST", "pods", "", "cluster", "200"): 1,
        }
