"""Quantities of any magnitude the API server accepts: a pod no instance type can hold is unschedulable with its
reason, and every other pod is placed as if it were not there (the scheduler's int64 columns hold such amounts at
`catalog.BEYOND` instead of overflowing)."""

from __future__ import annotations

import dataclasses

import pytest
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels, quantity
from karpy.scheduling import catalog, scheduler

GIANT = ["9Pi", "1Ei", "1e30", "1e999999999", "9" * 5000]


@pytest.mark.parametrize("memory", GIANT)
@pytest.mark.parametrize("pod_by_pod", [False, True])
def test_a_pod_no_type_can_hold_is_unschedulable_and_the_others_are_placed(memory: str, pod_by_pod: bool) -> None:
    normal = scheduling_conftest.make_pods(4)
    giant = builders.parsed_pod("giant", memory=memory, created=-1.0)  # first in the queue
    res = scheduler.solve(
        scheduler.SchedulingInput(
            pods=[giant, *normal],
            nodepools=[builders.parsed_nodepool(requirements=[])],
            instance_types={"default": scheduling_conftest.fake_catalog(20)},
        ),
        pod_by_pod=pod_by_pod,
    )
    scheduling_conftest.expect_scheduled(res, *normal)
    scheduling_conftest.expect_not_scheduled(res, giant)
    shown = quantity.format_resource(labels.RESOURCE_MEMORY, quantity.parse(memory))
    assert f'"memory":"{shown}"' in res.unschedulable[giant.key], "the reason shows the exact request"
    assert res.cost_per_hour <= scheduling_conftest.solve(normal).cost_per_hour + 1e-9


def test_a_giant_cpu_request_reads_back_exactly_in_the_reason() -> None:
    giant = builders.parsed_pod("giant", cpu="1e30", memory="1Gi")
    res = scheduling_conftest.solve([giant])
    assert '"cpu":"1000000000000000000000000000000"' in res.unschedulable[giant.key]


def test_existing_nodes_with_beyond_int64_allocatable_still_take_pods() -> None:
    # A Node may report any allocatable; below the int64 bound it is compared exactly, above it a request fits
    # nowhere (no real node has 2 PiB of memory).
    node = scheduler.ExistingNode(
        name="huge",
        labels={labels.LABEL_HOSTNAME: "huge"},
        taints=(),
        allocatable={
            labels.RESOURCE_CPU: quantity.parse("1e30"),
            labels.RESOURCE_MEMORY: quantity.parse("1Ei"),
            labels.RESOURCE_PODS: quantity.parse("110"),
        },
        pods=tuple(scheduling_conftest.make_pods(3, prefix="bound", memory="1Ti")),
    )
    fits = builders.parsed_pod("fits", cpu="1e6", memory="1Pi")
    beyond = builders.parsed_pod("beyond", memory="3Pi")  # 3 PiB > catalog.BEYOND milli-bytes
    assert quantity.parse("1Pi") < catalog.BEYOND < quantity.parse("3Pi")
    res = scheduling_conftest.solve([fits, beyond], existing_nodes=[node])
    assert [p.key for p in res.existing_nodes["huge"]] == [fits.key]
    scheduling_conftest.expect_not_scheduled(res, beyond)


def test_daemonset_overhead_beyond_int64_makes_the_pool_useless_not_broken() -> None:
    daemons = [
        dataclasses.replace(builders.parsed_pod(f"ds-{i}", memory="1Ei"), owner_kind="DaemonSet") for i in range(4)
    ]
    workload = scheduling_conftest.make_pods(2)
    res = scheduling_conftest.solve(workload, daemonsets=daemons)
    scheduling_conftest.expect_not_scheduled(res, *workload)
    assert "daemonset overhead" in res.unschedulable[workload[0].key]


def test_nodepool_limits_of_any_magnitude() -> None:
    pool = builders.parsed_nodepool(limits={labels.RESOURCE_CPU: "1e999999999"}, requirements=[])
    ps = scheduling_conftest.make_pods(3)
    res = scheduling_conftest.solve(ps, pools=[pool])
    scheduling_conftest.expect_scheduled(res, *ps)
