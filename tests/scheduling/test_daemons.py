"""DaemonSet overhead on new NodeClaims (core: scheduling.go buildDaemonOverheadGroups, isDaemonPodCompatible).

A daemon counts on an instance type when it tolerates the pool's taints (PreferNoSchedule always) and one of its
ORed required node-affinity terms fits the pool and the type; its requests and host ports then belong to every
node of that type. Invariant: a claim's requests (its pods plus the daemon overhead) fit every type it offers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders
from tests.scheduling import conftest as scheduling_conftest

from karpy.api import labels, quantity
from karpy.cloudprovider.fake import generator
from karpy.scheduling import pods, resources, scheduler

CATALOG = generator.default_instance_types()
CAPACITY_4 = {labels.RESOURCE_CPU: 4000, labels.RESOURCE_MEMORY: 4 * quantity.GI}


def _host_port(port: int) -> dict[str, int]:
    return {"containerPort": port, "hostPort": port}


def _daemon(name: str = "ds", *, cpu: str = "2", memory: str = "2Gi", host_port: int = 0, **spec: Any) -> pods.Pod:
    container: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    if host_port:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port}]
    return pods.from_manifest(
        {
            "metadata": {"name": name, "ownerReferences": [{"kind": "DaemonSet", "name": name, "controller": True}]},
            "spec": {"containers": [container], **spec},
        }
    )


def _capacity_of_choice(pool_taints: Sequence[Mapping[str, str]] = (), **kwargs: Any) -> dict[str, int]:
    res = scheduling_conftest.solve(
        [builders.parsed_pod(requests={"cpu": "1", "memory": "1Gi"}, tolerations=[{"operator": "Exists"}])],
        pools=[builders.parsed_nodepool(taints=pool_taints, labels={"foo": "bar"}, requirements=[])],
        catalog=CATALOG,
        **kwargs,
    )
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert claim.cheapest is not None
    chosen = next(t for t in CATALOG if t.name == claim.cheapest.instance_type)
    return {k: chosen.capacity[k] for k in CAPACITY_4}


def test_overhead_larger_than_every_type_blocks_a_pod_without_requests() -> None:
    # suite_test.go "should not schedule if daemonset overhead is too large"
    huge = _daemon(cpu="10000", memory="10000Gi")
    pod = builders.parsed_pod(cpu=None)
    res = scheduling_conftest.solve([pod], catalog=CATALOG, daemonsets=[huge])
    scheduling_conftest.expect_not_scheduled(res, pod)
    assert not res.new_nodeclaims


def test_daemon_with_a_matching_second_affinity_term_is_counted() -> None:
    # suite_test.go "should consider a daemonset schedulable with multiple node affinity terms"
    terms = [
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["voo"]}]},
        {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]},
    ]
    ds = _daemon(
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    )
    assert _capacity_of_choice(daemonsets=[ds]) == CAPACITY_4


def test_daemon_ignores_a_pools_prefer_no_schedule_taint() -> None:
    # suite_test.go "should consider a daemonset schedulable with a PreferNoSchedule taint"
    taint = {"key": "test", "effect": labels.EFFECT_PREFER_NO_SCHEDULE}
    assert _capacity_of_choice([taint], daemonsets=[_daemon()]) == CAPACITY_4


def test_daemon_host_port_blocks_a_pod_needing_it() -> None:
    # suite_test.go (provisioning) "should account for daemonset hostports"
    pod = builders.parsed_pod(requests={"cpu": "1", "memory": "1Gi"}, ports=[_host_port(8080)])
    res = scheduling_conftest.solve([pod], catalog=CATALOG, daemonsets=[_daemon(host_port=8080)])
    scheduling_conftest.expect_not_scheduled(res, pod)
    other = builders.parsed_pod("q", requests={"cpu": "1", "memory": "1Gi"}, ports=[_host_port(8081)])
    scheduling_conftest.expect_scheduled(
        scheduling_conftest.solve([other], catalog=CATALOG, daemonsets=[_daemon(host_port=8080)]), other
    )


def test_daemon_host_port_only_blocks_the_types_the_daemon_runs_on() -> None:
    # suite_test.go (provisioning) "should not account for daemonset hostports when daemonset would not schedule on
    # selected node": the 8080 daemon runs only on large types, so a small type still takes the pod
    large = _daemon("large", cpu="4", memory="4Gi", host_port=8080, nodeSelector={generator.LABEL_SIZE: "large"})
    small = _daemon("small", host_port=8081, nodeSelector={generator.LABEL_SIZE: "small"})
    pod = builders.parsed_pod(
        requests={"cpu": "1", "memory": "1Gi"}, ports=[_host_port(8080)], nodeSelector={generator.LABEL_SIZE: "small"}
    )
    res = scheduling_conftest.solve([pod], catalog=CATALOG, daemonsets=[large, small])
    (claim,) = scheduling_conftest.expect_provisioned(res, 1)
    assert claim.cheapest is not None
    assert claim.cheapest.instance_type == "default-instance-type"


_REQUESTS = st.fixed_dictionaries(
    {"cpu": st.sampled_from(["0", "100m", "1", "1500m", "3"]), "memory": st.sampled_from(["0", "128Mi", "1Gi", "3Gi"])}
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pod_requests=st.lists(st.one_of(st.none(), _REQUESTS), min_size=1, max_size=12),
    daemon_requests=st.lists(_REQUESTS, max_size=3),
    sizes=st.lists(st.sampled_from(["", "small", "large"]), min_size=3, max_size=3),
)
def test_claim_requests_fit_every_offered_type(
    pod_requests: list[dict[str, str] | None], daemon_requests: list[dict[str, str]], sizes: list[str]
) -> None:
    daemons = [
        _daemon(f"ds-{i}", **r, **({"nodeSelector": {generator.LABEL_SIZE: s}} if s else {}))
        for i, (r, s) in enumerate(zip(daemon_requests, sizes, strict=False))
    ]
    ps = [builders.parsed_pod(f"p-{i}", requests=r, cpu=None) for i, r in enumerate(pod_requests)]
    res = scheduling_conftest.solve(ps, catalog=CATALOG, daemonsets=daemons)
    for claim in res.new_nodeclaims:
        assert claim.instance_type_options
        for option in claim.instance_type_options:
            assert resources.fits(claim.requests, option.allocatable), (option.name, claim.requests)


def _in_flight(*bound: pods.Pod, labels_: dict[str, str] | None = None) -> scheduler.ExistingNode:
    return scheduler.ExistingNode(
        name="in-flight",
        labels={labels.LABEL_NODEPOOL: "default", **(labels_ or {})},
        taints=(),
        allocatable={
            labels.RESOURCE_CPU: 15_900,
            labels.RESOURCE_MEMORY: 64 * quantity.GI,
            labels.RESOURCE_PODS: 110_000,
        },
        pods=bound,
        initialized=False,
    )


def test_an_existing_node_keeps_room_for_the_daemons_still_to_come() -> None:
    # suite_test.go "should track daemonset usage separately so we know how many DS resources are remaining to be
    # scheduled": an in-flight node of 15.9 CPU keeps 1 CPU for a 1-CPU daemon not bound there yet, so a 15-CPU pod
    # does not fit; once the daemon's pod is bound, its own requests count instead and 14.9 CPU are left
    ds = _daemon(cpu="1", memory="1Gi")
    res = scheduling_conftest.solve(
        [builders.parsed_pod("big", requests={"cpu": "15"})],
        catalog=CATALOG,
        daemonsets=[ds],
        existing_nodes=[_in_flight()],
    )
    assert "in-flight" not in res.existing_nodes
    bound = dataclasses.replace(_daemon("ds-pod", cpu="1", memory="2Gi"), node_name="in-flight")
    pod = builders.parsed_pod("big", requests={"cpu": "14900m"})
    res = scheduling_conftest.solve([pod], catalog=CATALOG, daemonsets=[ds], existing_nodes=[_in_flight(bound)])
    assert [p.name for p in res.existing_nodes["in-flight"]] == ["big"]
    # a daemon the node's labels do not admit reserves nothing
    picky = _daemon(cpu="1", memory="1Gi", nodeSelector={"my-node-label": "value"})
    big = builders.parsed_pod("big", requests={"cpu": "15"})
    res = scheduling_conftest.solve([big], catalog=CATALOG, daemonsets=[picky], existing_nodes=[_in_flight()])
    assert [p.name for p in res.existing_nodes["in-flight"]] == ["big"]
    admitted = _in_flight(labels_={"my-node-label": "value"})
    assert (
        "in-flight"
        not in scheduling_conftest.solve(
            [big], catalog=CATALOG, daemonsets=[picky], existing_nodes=[admitted]
        ).existing_nodes
    )
