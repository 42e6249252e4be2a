"""`GET /explain/node/<name>` on the metrics port: the running controller's explanation of one node is the JSON
`karpy explain --node NAME -o json` prints for the same cluster, read from the controller's own state."""

from __future__ import annotations

import functools
from typing import Any

import aiohttp
from tests import builders, polling
from tests.disruption import world as disruption_world
from tests.operator.test_app import make_settings, running

from karpy import clock as karpy_clock
from karpy.explain import report, run
from karpy.kube import resources, rest
from karpy.runtime import explaining, servers
from karpy.state import cluster as state_cluster
from karpy_emulator.apiserver import runner

CATALOG = {"default": list(disruption_world.CATALOG)}


def world() -> disruption_world.World:
    w = disruption_world.World()
    w.pool(budgets=[{"nodes": "1"}])
    w.node("a")
    w.node("b")
    w.pod("pa", "a", cpu="1")
    w.pod("pb", "b", cpu="1")
    w.node("guarded")
    w.pod("web", "guarded", pod_labels={"app": "web"})
    w.pdb("web-pdb", {"app": "web"}, allowed=0)
    w.sync()
    return w


def source(cluster: state_cluster.Cluster, w: disruption_world.World) -> explaining.Source:
    return explaining.Source(cluster=cluster, cloud=w.cloud, clock=w.clock, queued=frozenset, options=run.Options())


async def _no_metrics() -> bytes:
    return b""


async def get(src: explaining.Source, path: str) -> tuple[int, dict[str, Any]]:
    app = servers.metrics_app(_no_metrics, explain_node=functools.partial(explaining.node, src))
    async with (
        servers.serving(app, host="127.0.0.1", port=0) as port,
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.json()


async def test_the_endpoint_answers_what_the_cli_prints_for_the_node() -> None:
    w = world()
    for name in ("a", "b", "guarded"):
        status, body = await get(source(w.cluster, w), f"/explain/node/{name}")
        offline = run.explain(run.prepare(w.cluster, CATALOG, clock=w.clock, options=run.Options(node=name)))
        assert status == 200
        assert body == report.to_json(offline)
        assert [n["name"] for n in body["nodes"]] == [name]
    _, guarded = await get(source(w.cluster, w), "/explain/node/guarded")
    assert guarded["nodes"][0]["reasons"][0]["kind"] == "pdb"


async def test_an_unknown_node_is_404_and_an_unsynced_state_503() -> None:
    w = world()
    status, body = await get(source(w.cluster, w), "/explain/node/ghost")
    assert (status, body) == (404, {"error": "node 'ghost' not found"})
    empty = state_cluster.Cluster(clock=karpy_clock.ManualClock(), expected=[resources.NODES])
    status, body = await get(source(empty, w), "/explain/node/a")
    assert status == 503


async def test_the_running_controller_serves_it_on_its_metrics_port(
    kube: runner.KubeAPIRunner, api: rest.RestClient
) -> None:
    async with running(kube, make_settings(DISABLE_LEADER_ELECTION="true")) as run_, aiohttp.ClientSession() as http:
        await api.create(resources.NODES, builders.node("unmanaged"))
        url = f"http://127.0.0.1:{run_.metrics_port}/explain/node/unmanaged"

        async def explained() -> dict[str, Any] | None:
            """the node is in the controller's state and explained"""
            async with http.get(url) as response:
                return await response.json() if response.status == 200 else None  # type: ignore[no-any-return]

        body = await polling.until(explained)
        (node,) = body["nodes"]
        assert (node["verdict"], node["reasons"][0]["kind"]) == ("blocked", "not-managed")
