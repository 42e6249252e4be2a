"""A scrape served off the event loop: a snapshot read on the loop, rendered in a worker thread.

At 5,000 nodes and 50,000 pods one exposition is about 65 MB and seconds of CPU; rendered inside the HTTP handler it
froze the controller's loop (provisioning, disruption, lease renewal, the watches) for as long. Upstream serves
/metrics on a goroutine of its own (controller-runtime: pkg/metrics/server/server.go). A scrape here has two halves:

- `Registry.snapshot`, on the loop, every collector in registration order with no await between them, so the
  scrape is one consistent view. A `Deferring` collector reads what it needs of the state the loop changes into
  values nobody changes afterwards and returns its render: lists and tuples it builds, of objects the state cache
  stores and replaces on every change but never edits in place (`state.trimming`: "the input is never changed"),
  copies of mutable records (`PodTimes.frozen`). Every other collector (prometheus_client's own metrics, the cheap
  gauges) is collected there and then, into families only this scrape holds.
- The render (the deferred collectors' renders, then the text format) in a worker thread, reading only those.

`Scrapes` renders one scrape at a time: a scrape that arrives while one renders gets that one's result, so two
Prometheus servers scraping at once cost one render, and a collector's own memo is never used by two renders at once.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, runtime_checkable

from prometheus_client import core as prometheus_client_core
from prometheus_client import registry as prometheus_client_registry

from karpy.runtime.metrics import textformat
from karpy.state import cluster as state_cluster
from karpy.state import statenode

Render = Callable[[], Iterable[prometheus_client_core.Metric]]
"""A collector's families from its snapshot: safe to call in any thread."""


class Reads:
    """The state cache's views several collectors of one snapshot read: `state_nodes` builds a StateNode per node on
    every call (about 0.1 s at 5,000 nodes), so one snapshot builds them once."""

    def __init__(self) -> None:
        self._nodes: dict[int, tuple[state_cluster.Cluster, list[statenode.StateNode]]] = {}

    def state_nodes(self, source: state_cluster.Cluster) -> list[statenode.StateNode]:
        # the entry holds `source`, so its id names no other object while this snapshot lasts
        hit = self._nodes.get(id(source))
        if hit is None:
            hit = self._nodes[id(source)] = (source, source.state_nodes())
        return hit[1]


@runtime_checkable
class Deferring(Protocol):
    def snapshot(self, reads: Reads) -> Render:
        """On the loop: read what the families need into values nobody changes afterwards; return their render."""
        ...


class DeferringCollector(prometheus_client_registry.Collector, abc.ABC):
    """A collector whose heavy part renders off the loop; `collect` does both halves on the calling thread (tests,
    `Metrics.exposition`)."""

    @abc.abstractmethod
    def snapshot(self, reads: Reads) -> Render: ...

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        yield from self.snapshot(Reads())()


class Snapshot(prometheus_client_registry.Collector):
    """A registry's families as of one snapshot, rendered when collected."""

    def __init__(self, renders: Iterable[Render]) -> None:
        self._renders = tuple(renders)

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        for render in self._renders:
            yield from render()


def _given(families: list[prometheus_client_core.Metric]) -> Render:
    return lambda: families


class Registry(prometheus_client_registry.CollectorRegistry):
    """prometheus_client's registry, which also takes a snapshot of its collectors in its own order."""

    def __init__(self) -> None:
        super().__init__(auto_describe=True)
        self._ordered: dict[prometheus_client_registry.Collector, Deferring | None] = {}
        """Each collector in registration order, and itself again when it is `Deferring`: asked once here, since
        a runtime-checkable Protocol's isinstance walks the protocol's members (a quarter of a scrape's snapshot)."""

    def register(self, collector: prometheus_client_registry.Collector) -> None:
        super().register(collector)
        self._ordered[collector] = collector if isinstance(collector, Deferring) else None

    def unregister(self, collector: prometheus_client_registry.Collector) -> None:
        super().unregister(collector)
        self._ordered.pop(collector, None)

    def snapshot(self) -> Snapshot:
        """Every collector's snapshot, or its families, in the order `collect` yields them (call on the loop)."""
        reads = Reads()
        renders: list[Render] = []
        for collector, deferring in list(self._ordered.items()):
            if deferring is not None:
                renders.append(deferring.snapshot(reads))
            else:
                renders.append(_given(list(collector.collect())))
        return Snapshot(renders)


class Scrapes:
    """The scrapes of one registry, rendered in the loop's default executor one at a time."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._rendering: asyncio.Future[bytes] | None = None

    async def scrape(self) -> bytes:
        rendering = self._rendering
        if rendering is None:
            snapshot = self._registry.snapshot()
            rendering = asyncio.get_running_loop().run_in_executor(None, textformat.render, snapshot)
            self._rendering = rendering
            rendering.add_done_callback(self._rendered)
        # shielded: a scraper that hangs up leaves the render to the others waiting for it
        return await asyncio.shield(rendering)

    def rendering(self) -> bool:
        """A render is under way."""
        return self._rendering is not None

    def _rendered(self, rendering: asyncio.Future[bytes]) -> None:
        if self._rendering is rendering:
            self._rendering = None
        if not rendering.cancelled():
            rendering.exception()  # retrieved: every scraper waiting for it may have hung up
