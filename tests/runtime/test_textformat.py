"""The registry's text exposition is prometheus_client's `generate_latest`, byte for byte, while the per-object
gauges' label text is rendered once per object (`textformat`)."""

from __future__ import annotations

import prometheus_client
import pytest
from tests import builders
from tests.runtime import exporting

from karpy import clock
from karpy.api import labels
from karpy.kube import client, resources
from karpy.runtime import metrics
from karpy.runtime.metrics import textformat
from karpy.state import cluster


def test_every_series_renders_as_generate_latest_does() -> None:
    m = exporting.driven()
    assert m.exposition() == prometheus_client.generate_latest(m.registry)
    assert m.exposition() == prometheus_client.generate_latest(m.registry)  # again, from the labels kept


@pytest.mark.parametrize("zone", ['say "a"', "back\\slash", "new\nline", "plain"])
def test_label_values_are_escaped_as_generate_latest_does(zone: str) -> None:
    state = cluster.Cluster(clock=clock.ManualClock(exporting.START))
    node = builders.node("n1", labels={labels.LABEL_ZONE: zone, labels.LABEL_NODEPOOL: "web"}, capacity={"cpu": "5"})
    state.apply(resources.NODES, client.WatchEvent(client.ADDED, node))
    pod = builders.pod("p", node="n1")
    state.apply(resources.PODS, client.WatchEvent(client.ADDED, pod))
    m = metrics.Metrics()
    m.watch_cluster_series(state, now=lambda: exporting.START)
    assert m.exposition() == prometheus_client.generate_latest(m.registry)
    assert textformat.escape(zone) in m.exposition().decode()


def test_a_rendered_sample_without_labels_has_no_braces() -> None:
    family = textformat.RenderedGauge("karpenter_example", "An example")
    family.add_rendered({}, "", 2.0)
    registry = prometheus_client.CollectorRegistry()

    class _One(prometheus_client.registry.Collector):
        def collect(self) -> list[textformat.RenderedGauge]:
            return [family]

    registry.register(_One())
    assert textformat.render(registry) == prometheus_client.generate_latest(registry)
