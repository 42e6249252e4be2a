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
    """A gauge family whose samples also carry their label text (`label_text` of their sorted labels), plus, when
    `added` names one, a label whose value each sample gives.

    `render` reads only the text; the samples, which prometheus_client's readers want, are built when read. Built
    per scrape, 100,000 of them (a dict and a tuple each) outlived the collector's young generations and brought on
    its full collection, which holds every thread (0.7 s at 50,000 pods); the lists here hold references and
    strings."""

    def __init__(self, name: str, documentation: str, *, added: str = "") -> None:
        super().__init__(name, documentation, labels=())
        self.added = added
        self.texts: list[str] = []
        self.values: list[float] = []
        self._labels: list[Mapping[str, str]] = []
        self._added: list[str] = []

    def add_rendered(self, labels: Mapping[str, str], text: str, value: float, *, added: str = "") -> None:
        """A sample of `labels` (kept, not copied), and of the `added` label's value when the family has one."""
        self.texts.append(text)
        self.values.append(value)
        self._labels.append(labels)
        self._added.append(added)

    @property
    def samples(self) -> list[prometheus_client_core.Sample]:
        out = []
        for labels, added, value in zip(self._labels, self._added, self.values, strict=True):
            every = {**labels, self.added: added} if self.added else dict(labels)
            out.append(prometheus_client_core.Sample(self.name, every, value, None, None))
        return out

    @samples.setter
    def samples(self, value: list[prometheus_client_core.Sample]) -> None:
        if value:  # Metric.__init__ sets none
            raise ValueError("a RenderedGauge's samples are added with add_rendered")


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
    for text, value in zip(metric.texts, metric.values, strict=True):
        yield f"{name}{{{text}}} {to_go(value)}\n" if text else f"{name} {to_go(value)}\n"


def render(registry: prometheus_client_registry.Collector) -> bytes:
    out: list[str] = []
    for metric in registry.collect():
        if isinstance(metric, RenderedGauge):
            out.extend(_rendered(metric))
        else:
            out.append(prometheus_client.generate_latest(_Single(metric)).decode())
    return "".join(out).encode()
