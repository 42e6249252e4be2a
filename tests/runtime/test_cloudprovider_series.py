"""karpenter_cloudprovider_duration_seconds and _errors_total: every provider method timed on the injected clock and
its errors counted under upstream's error kind, per calling controller (core: cloudprovider/metrics/cloudprovider.go),
and every reconciler of the object graph calling the provider through such a wrapper."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from tests import builders
from tests.runtime import test_metrics_hooks as runtime_test_metrics_hooks
from tests.wiring import test_gated_controllers as wiring_test_gated_controllers

from karpy import clock
from karpy.api import parse
from karpy.cloudprovider import errors, metered, types
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.runtime import metrics

DURATION = "karpenter_cloudprovider_duration_seconds"
ERRORS = "karpenter_cloudprovider_errors_total"


class _SlowFake(fake_provider.FakeCloudProvider):
    """Every list takes three virtual seconds."""

    def __init__(self, manual: clock.ManualClock) -> None:
        super().__init__()
        self._clock = manual

    async def list(self) -> Any:
        self._clock.advance(3.0)
        return await super().list()


CALLS: list[tuple[str, Callable[[types.CloudProvider], Awaitable[object]]]] = [
    ("Create", lambda p: p.create(builders.parsed_nodeclaim("web-x", pool="web"))),
    ("Get", lambda p: p.get("fake://nowhere/i-0")),
    ("List", lambda p: p.list()),
    ("GetInstanceTypes", lambda p: p.instance_types(parse.nodepool(builders.nodepool("web")))),
    ("IsDrifted", lambda p: p.is_drifted(builders.parsed_nodeclaim("web-x", pool="web"))),
]


@pytest.mark.parametrize(("method", "call"), CALLS)
async def test_every_method_is_timed_under_its_upstream_name(
    method: str, call: Callable[[types.CloudProvider], Awaitable[object]]
) -> None:
    m, manual = metrics.Metrics(), clock.ManualClock(0.0)
    provider = m.metered(fake_provider.FakeCloudProvider(), "provisioner", clock=manual)
    with contextlib.suppress(errors.CloudProviderError):  # Get of an unknown instance: still timed
        await call(provider)
    labels = {"controller": "provisioner", "method": method, "provider": "fake"}
    assert runtime_test_metrics_hooks.counter(m, f"{DURATION}_count", **labels) == 1


async def test_the_time_is_the_injected_clocks() -> None:
    m, manual = metrics.Metrics(), clock.ManualClock(0.0)
    await m.metered(_SlowFake(manual), "disruption", clock=manual).list()
    labels = {"controller": "disruption", "method": "List", "provider": "fake"}
    assert runtime_test_metrics_hooks.counter(m, f"{DURATION}_sum", **labels) == 3.0


@pytest.mark.parametrize(
    ("error", "label"),
    [
        (errors.InsufficientCapacity("none left"), "InsufficientCapacityError"),
        (errors.NodeClassNotReady("no AMI"), "NodeClassNotReadyError"),
        (errors.CreateError(errors.CreateErrorReason.FLEET, "boom"), ""),  # not a kind upstream names
    ],
)
async def test_errors_are_counted_by_upstreams_kind(error: Exception, label: str) -> None:
    m, inner = metrics.Metrics(), fake_provider.FakeCloudProvider()
    inner.next_error = error
    with pytest.raises(type(error)):
        await m.metered(inner, "nodeclaim.lifecycle", clock=clock.ManualClock(0.0)).create(
            builders.parsed_nodeclaim("web-x", pool="web")
        )
    labels = {"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "fake", "error": label}
    assert runtime_test_metrics_hooks.counter(m, ERRORS, **labels) == 1


def test_a_missing_instance_is_labelled_not_found() -> None:
    assert metered.error_label(errors.NodeClaimNotFound("gone")) == "NodeClaimNotFoundError"


def test_each_reconciler_calls_the_provider_under_its_upstream_controller_name() -> None:
    ctrl = wiring_test_gated_controllers._controller("")
    wired = {
        "provisioner": ctrl.provisioner._deps.cloud,
        "disruption": ctrl.disruption._deps.cloud,
        "nodeclaim.lifecycle": ctrl.nodeclaims._deps.cloud,
        "node.termination": ctrl.termination._deps.cloud,
        "nodeclaim.disruption": ctrl.nodeclaim_conditions._cloud,
    }
    for name, provider in wired.items():
        assert isinstance(provider, metered.MeteredProvider), name
        assert provider._controller == name
        assert provider.inner is ctrl.cloud.provider
