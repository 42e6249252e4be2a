"""The registry in Prometheus's text format, with the label text of the per-object gauges rendered once per object.

prometheus_client's `generate_latest` formats and escapes every label of every sample on every scrape. Upstream's
node gauges carry the cloud provider's well-known labels (dozens per node) and `karpenter_pods_state` a dozen per
pod, so at 5,000 nodes and 50,000 pods most of a scrape went into formatting the same labels again. A
`RenderedGauge` carries each sample's label text beside its labels, rendered when its object changed
(`nodelabels.PerObject`); `render` writes those families from that text and hands every other family to
`generate_latest`. The output is generate_latest's, byte for byte (tests/runtime/test_textformat.py).
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Iterator, Mapping

import prometheus_client
from prometheus_client import core as prometheus_client_core
from prometheus_client import registry as prometheus_client_registry
from prometheus_client import utils as prometheus_client_utils


def escape(value: str) -> str:
    """A label value as the text format quotes it."""
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def label_text(labels: Iterable[tuple[str, str]]) -> str:
    """`a="1",b="2"` of (name, value) pairs already in name order (names are Prometheus's legacy label names)."""
    return ",".join(f'{name}="{escape(value)}"' for name, value in labels)


def joined(*parts: str) -> str:
    """Label texts joined, empty ones left out."""
    return ",".join(part for part in parts if part)


class RenderedGauge(prometheus_client_core.GaugeMetricFamily):
    """A gauge family whose samples also carry their label text (`label_text` of their sorted labels)."""

    def __init__(self, name: str, documentation: str) -> None:
        super().__init__(name, documentation, labels=())
        self.rendered: list[tuple[str, float]] = []

    def add_rendered(self, labels: Mapping[str, str], text: str, value: float) -> None:
        self.add_sample(self.name, dict(labels), value)
        self.rendered.append((text, value))


class _Single(prometheus_client_registry.Collector):
    def __init__(self, metric: prometheus_client_core.Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        yield self._metric


def _rendered(metric: RenderedGauge) -> Iterator[str]:
    name = metric.name
    documentation = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
    yield f"# HELP {name} {documentation}\n# TYPE {name} gauge\n"
    to_go = typing.cast(Callable[[float], str], prometheus_client_utils.floatToGoString)
    for text, value in metric.rendered:
        yield f"{name}{{{text}}} {to_go(value)}\n" if text else f"{name} {to_go(value)}\n"


def render(registry: prometheus_client_registry.Collector) -> bytes:
    out: list[str] = []
    for metric in registry.collect():
        if isinstance(metric, RenderedGauge):
            out.extend(_rendered(metric))
        else:
            out.append(prometheus_client.generate_latest(_Single(metric)).decode())
    return "".join(out).encode()
