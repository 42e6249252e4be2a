"""The cloud provider's series: upstream's `karpenter_cloudprovider_*` method timings and errors (fed by
`MeteredProvider`), and the counts of API calls, instance launch/termination failures, request batches and rendered
user data sizes the AWS provider keeps in its worker threads, read at scrape time. Offering prices for the cost
gauges live here too."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, TypeVar

import prometheus_client
from prometheus_client import core as prometheus_client_core
from prometheus_client import registry as prometheus_client_registry

from karpy import clock as karpy_clock
from karpy.cloudprovider import metered, parts, types
from karpy.runtime.metrics import naming


class CloudProviderSeries:
    """karpenter_cloudprovider_duration_seconds and _errors_total, by controller, method and provider."""

    def __init__(self, registry: prometheus_client_registry.CollectorRegistry) -> None:
        self.duration = prometheus_client.Histogram(
            f"{naming.NAMESPACE}_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls, by the controller, method name and provider",
            ["controller", "method", "provider"],
            buckets=naming.GO_DEFAULT_BUCKETS,
            registry=registry,
        )
        self.errors = prometheus_client.Counter(
            f"{naming.NAMESPACE}_cloudprovider_errors",
            "Errors of cloud provider method calls, by the controller, method name, provider and error kind",
            ["controller", "method", "provider", "error"],
            registry=registry,
        )

    def metered(
        self, provider: types.CloudProvider, controller: str, *, clock: karpy_clock.Clock
    ) -> metered.MeteredProvider:
        """`provider` as `controller` calls it, timed and its errors counted."""
        name = provider.name
        return metered.MeteredProvider(
            provider,
            controller,
            clock=clock,
            observe=lambda ctrl, method, seconds: self.duration.labels(
                controller=ctrl, method=method, provider=name
            ).observe(seconds),
            failed=lambda ctrl, method, error: self.errors.labels(
                controller=ctrl, method=method, provider=name, error=error
            ).inc(),
        )


class CloudCallCollector(prometheus_client.registry.Collector):
    """Counters of every cloud API call and the request batchers' histograms, read from the provider's own count
    at scrape time (the calls happen in worker threads, where the counting is done)."""

    def __init__(self, source: parts.CloudCalls) -> None:
        self._source = source

    def collect(self) -> Iterator[prometheus_client_core.Metric]:
        source, ns = self._source, naming.NAMESPACE
        counters: tuple[tuple[str, str, tuple[str, ...], _Samples], ...] = (
            (
                "karpy_cloudprovider_api_calls",
                "Cloud provider API calls by service and operation",
                _CALL,
                source.calls().items(),
            ),
            (
                "karpy_cloudprovider_api_attempts",
                "HTTP requests of cloud provider API calls (retries included) by service and operation",
                _CALL,
                source.attempts().items(),
            ),
            (
                "karpy_cloudprovider_api_errors",
                "Cloud provider API calls that failed after their retries, by error code",
                (*_CALL, "code"),
                source.errors().items(),
            ),
            (
                f"{ns}_cloudprovider_instance_launch_failures",
                "Instance launch failures, by zone, zone id, capacity type and reason "
                "(aws: providers/instance/metrics.go)",
                ("zone", "zone_id", "capacity_type", "reason"),
                source.launch_failures().items(),
            ),
            (
                f"{ns}_cloudprovider_instance_termination_failures",
                "Failed instance terminations, by zone and zone id",
                ("zone", "zone_id"),
                source.termination_failures().items(),
            ),
        )
        for name, doc, labels, table in counters:
            yield _filled(prometheus_client_core.CounterMetricFamily(name, doc, labels=labels), table)
        userdata = prometheus_client_core.GaugeMetricFamily(
            f"{ns}_ec2nodeclasses_userdata_bytes",
            "Size in bytes of the rendered user data (raw, pre-base64) for the EC2NodeClass",
            labels=["nodeclass"],
        )
        yield _filled(userdata, (((nodeclass,), size) for nodeclass, size in source.userdata_bytes().items()))
        sizes = prometheus_client_core.HistogramMetricFamily(
            f"{naming.NAMESPACE}_cloudprovider_batcher_batch_size",
            "Size of the request batch per batcher",
            labels=["batcher"],
        )
        times = prometheus_client_core.HistogramMetricFamily(
            f"{naming.NAMESPACE}_cloudprovider_batcher_batch_time_seconds",
            "Duration of the batching window per batcher",
            labels=["batcher"],
        )
        for batcher, stats in sorted(source.batches().items()):
            for histogram_family, histogram in ((sizes, stats.sizes), (times, stats.window_seconds)):
                histogram_family.add_metric(
                    [batcher],
                    [(_bound(upper), count) for upper, count in histogram.buckets],
                    sum_value=histogram.total,
                )
        yield sizes
        yield times


_CALL: Final = ("service", "operation")
"""Labels of a cloud provider API call."""
_Samples = Iterable[tuple[tuple[str, ...], float]]
_Family = TypeVar("_Family", prometheus_client_core.CounterMetricFamily, prometheus_client_core.GaugeMetricFamily)


def _filled(family: _Family, samples: _Samples) -> _Family:
    """`family` with each of `samples` (label values, value), in the order of the label values."""
    for values, value in sorted(samples):
        family.add_metric(list(values), value)
    return family


def _bound(upper: float) -> str:
    return "+Inf" if upper == float("inf") else str(float(upper))


class PriceBook:
    """Offering prices by (instance type, zone, capacity type), refreshed from the provider's instance types."""

    def __init__(self) -> None:
        self._prices: dict[tuple[str, str, str], float] = {}

    def update(self, instance_types: Iterable[types.InstanceType]) -> None:
        for it in instance_types:
            for offering in it.offerings:
                self._prices[(it.name, offering.zone, offering.capacity_type)] = offering.price

    def price(self, instance_type: str, zone: str, capacity_type: str) -> float | None:
        return self._prices.get((instance_type, zone, capacity_type))

    def listed(self) -> bool:
        """True once a listing priced anything: before it, every node is unpriced and none of them is an error."""
        return bool(self._prices)
