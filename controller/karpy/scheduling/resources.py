"""Resource maps (name -> int milli-units): arithmetic, fit checks and a pod's effective requests.

A pod's requests follow Kubernetes' effective-request rule (core: pkg/utils/resources Ceiling, which calls
component-helpers' PodRequests): the larger of the init phase and the run phase, plus pod overhead. Init containers
run one at a time, except sidecars (restartPolicy=Always) which keep running and so add to every later init
container and to the run phase. A container that sets a limit but no request requests its limit (apiserver
defaulting). Pod-level resources (`spec.resources`, Kubernetes 1.34) replace the containers' sum for the resources
they name that may be set at pod level (cpu, memory, hugepages-*), with the same limit-as-request defaulting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from karpy.api import labels, quantity

Resources = Mapping[str, int]


def add(*maps: Resources) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    return out


def subtract(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def maximum(a: Resources, b: Resources) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, 0), v)
    return out


def scale(a: Resources, factor: int) -> dict[str, int]:
    return {k: v * factor for k, v in a.items()}


def exceeded(requests: Resources, allocatable: Resources) -> list[str]:
    """Names of requested resources that do not fit (a missing allocatable entry counts as zero)."""
    return [k for k, v in requests.items() if v > 0 and v > allocatable.get(k, 0)]


def fits(requests: Resources, allocatable: Resources) -> bool:
    return not exceeded(requests, allocatable)


def describe(requests: Resources) -> str:
    """`{"cpu":"1","memory":"2Gi","pods":"3"}` style, sorted, for human reasons."""
    parts = [f'"{k}":"{quantity.format_resource(k, v)}"' for k, v in sorted(requests.items()) if v]
    return "{" + ",".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class Container:
    """The parts of a container that scheduling reads."""

    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    sidecar: bool = False  # init container with restartPolicy=Always

    def effective(self) -> dict[str, int]:
        out = dict(self.limits)
        out.update(self.requests)
        return out


def pod_level(name: str) -> bool:
    """May `name` be requested at pod level (component-helpers IsSupportedPodLevelResource)?"""
    return name in (labels.RESOURCE_CPU, labels.RESOURCE_MEMORY) or name.startswith("hugepages-")


def _peak(
    containers: Iterable[Container], init_containers: Iterable[Container], amounts: Callable[[Container], Resources]
) -> dict[str, int]:
    """max(init phase, run phase) of each container's `amounts`: init containers run one at a time beside the
    sidecars started before them, then the containers run beside every sidecar (component-helpers resource)."""
    run = add(*(amounts(c) for c in containers))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in init_containers:
        if c.sidecar:
            sidecars = add(sidecars, amounts(c))
            init_peak = maximum(init_peak, sidecars)
        else:
            init_peak = maximum(init_peak, add(sidecars, amounts(c)))
    return maximum(init_peak, add(run, sidecars))


def pod_requests(
    containers: Iterable[Container],
    init_containers: Iterable[Container] = (),
    *,
    overhead: Resources | None = None,
    pod: Container | None = None,
) -> dict[str, int]:
    """max(init phase, run phase), with `pod`'s pod-level requests in place of the containers' for the resources
    they set, + overhead, plus one `pods` slot."""
    total = _peak(containers, init_containers, Container.effective)
    if pod is not None:
        total.update({name: amount for name, amount in pod.effective().items() if pod_level(name)})
    total = add(total, overhead or {})
    total[labels.RESOURCE_PODS] = quantity.MILLI
    return total


def pod_limits(
    containers: Iterable[Container],
    init_containers: Iterable[Container] = (),
    *,
    overhead: Resources | None = None,
    pod: Container | None = None,
) -> dict[str, int]:
    """The pod's limits as the kubelet sums them (component-helpers resource.PodLimits, which upstream's
    karpenter_nodes_total_pod_limits reads): max(init phase, run phase) of the containers' limits, `pod`'s
    pod-level limits in their place where set, and the overhead added to the resources that have a limit."""
    total = _peak(containers, init_containers, lambda c: c.limits)
    if pod is not None:
        total.update({name: amount for name, amount in pod.limits.items() if pod_level(name)})
    for name, amount in (overhead or {}).items():
        if name in total:
            total[name] += amount
    return total
