"""Pods asking for Dynamic Resource Allocation (core: scheduling/scheduler.go `add`, utils/pod HasDRARequirements,
cases after its DRA suite): refused with upstream's message while IGNORE_DRA_REQUESTS is on (the default), placed
as ordinary pods when it is off; a DaemonSet pod asking for DRA adds no overhead while it is on."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy import settings
from karpy.scheduling import pods, scheduler

CLAIMED = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
CONTAINER_CLAIM = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}
INIT_CLAIM = {
    "initContainers": [{"name": "i", "resources": {"claims": [{"name": "gpu"}]}}],
}


@pytest.mark.parametrize(
    ("spec", "dra"),
    [({}, False), (CLAIMED, True), (CONTAINER_CLAIM, True), (INIT_CLAIM, True), ({"resourceClaims": []}, False)],
)
def test_dra_requirements_are_recognised(spec: dict[str, Any], dra: bool) -> None:
    assert builders.parsed_pod("p", **spec, memory="1Gi").dra is dra


def test_dra_pods_are_refused_by_default_and_the_others_still_placed() -> None:
    claimed = builders.parsed_pod("claimed", **CLAIMED, memory="1Gi")
    plain = builders.parsed_pod("plain", memory="1Gi")
    res = scheduling_conftest.solve([claimed, plain])
    scheduling_conftest.expect_scheduled(res, plain)
    assert res.unschedulable == {claimed.key: scheduler.DRA_REFUSED}
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert [p.key for p in claim.pods] == [plain.key]


def test_dra_pods_are_placed_as_ordinary_pods_when_not_ignored() -> None:
    claimed = builders.parsed_pod("claimed", **CONTAINER_CLAIM, memory="1Gi")
    res = scheduling_conftest.solve([claimed], options=settings.SchedulingSettings(ignore_dra_requests=False))
    scheduling_conftest.expect_scheduled(res, claimed)


def _daemon(name: str, spec: dict[str, Any]) -> pods.Pod:
    body: dict[str, Any] = {
        "containers": [{"name": "d", "resources": {"requests": {"cpu": "2"}}}],
        **spec,
    }
    manifest = {
        "metadata": {
            "name": name,
            "namespace": "kube-system",
            "ownerReferences": [{"kind": "DaemonSet", "controller": True, "name": name}],
        },
        "spec": body,
    }
    return pods.from_manifest(manifest)


@pytest.mark.parametrize(("ignore", "daemon_cpu"), [(True, 0), (False, 2000)])
def test_a_dra_daemonset_adds_overhead_only_when_not_ignored(ignore: bool, daemon_cpu: int) -> None:
    daemon = _daemon("gpu-agent", CLAIMED)
    pod = builders.parsed_pod("p", memory="1Gi")
    res = scheduling_conftest.solve(
        [pod], daemonsets=[daemon], options=settings.SchedulingSettings(ignore_dra_requests=ignore)
    )
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert claim.requests["cpu"] == 1000 + daemon_cpu
