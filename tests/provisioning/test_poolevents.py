"""NoCompatibleInstanceTypes (core: provisioning/scheduling/scheduler.go NewScheduler, events.go): a Warning on a
NodePool whose requirements leave none of its instance types, at most once a minute, and none on a pool that can
launch."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.provisioning import builders as provisioning_builders
from tests.scheduling.conftest import fake_catalog

from karpy import events, rejections
from karpy.clock import ManualClock
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import fake as kube_fake
from karpy.provisioning import poolevents, provisioner


def _req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(
    ("requirements", "compatible"),
    [
        ([], True),
        ([_req("node.kubernetes.io/instance-type", "In", "fake-it-1")], True),
        ([_req("node.kubernetes.io/instance-type", "In", "m9.nonexistent")], False),
        ([_req("topology.kubernetes.io/zone", "In", "mars-1a")], False),  # no offering in that zone
        ([_req("karpenter.sh/capacity-type", "In", "spot")], False),  # offered on demand only
        ([_req("example.com/team", "In", "web")], True),  # a label the types do not define: the pool sets it
    ],
)
def test_pools_whose_requirements_leave_no_instance_type(requirements: list[dict[str, Any]], compatible: bool) -> None:
    pool = builders.parsed_nodepool("web", requirements=requirements)
    left_out = poolevents.without_instance_types([pool], {"web": fake_catalog(4)})
    assert (left_out == []) == compatible


def test_a_pool_whose_types_did_not_resolve_is_not_reported() -> None:
    assert poolevents.without_instance_types([builders.parsed_nodepool("web")], {}) == []


async def test_the_provisioner_warns_on_the_pool_once_a_minute() -> None:
    manual = ManualClock(0.0)
    recorder = events.MemoryRecorder(manual)
    pools = [
        builders.nodepool("nowhere", uid="u-nowhere", requirements=[_req("topology.kubernetes.io/zone", "In", "mars")]),
        builders.nodepool("fine", requirements=[]),
    ]
    state = provisioning_builders.state(manual, pools=pools, pending=[builders.pod("a")])
    deps = provisioner.Deps(
        client=kube_fake.FakeKubeClient(manual), cluster=state,
        cloud=fake_provider.FakeCloudProvider(fake_catalog(4)), clock=manual, recorder=recorder,
        rejections=rejections.Discard(),
    )  # fmt: skip
    prov = provisioner.Provisioner(deps)
    await prov.provision()
    warned = [(r.name, r.kind, r.type, r.message) for r in recorder.events if r.reason == "NoCompatibleInstanceTypes"]
    assert warned == [("nowhere", "NodePool", "Warning", poolevents.NO_COMPATIBLE_MESSAGE)]
    manual.advance(30.0)
    await prov.provision()
    assert recorder.reasons("nowhere").count("NoCompatibleInstanceTypes") == 1
    manual.advance(31.0)
    await prov.provision()
    assert recorder.reasons("nowhere").count("NoCompatibleInstanceTypes") == 2
