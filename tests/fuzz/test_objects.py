"""Fuzz: malformed NodePools, NodeClaims, Nodes and pods in the controller's loops (Hypothesis, derandomized).

150 clusters per run, each a small healthy one (two pools, four nodes, bound and pending pods) in which a few
objects are mutated as the API server could hold them (other CRDs, a misbehaving client): a field retyped,
dropped or renamed. The mutated objects go through the state cache as watch events, then one disruption pass and
one provisioning pass run over it. Asserted: nothing raises out of a loop; every object either parses or is
reported as rejected; disruption acts only on nodes whose NodeClaim, Node and pods all read; provisioning creates
NodeClaims only for pods that read and only from NodePools that read."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles, mutations
from tests.disruption import world as disruption_world

from karpy import events, rejections
from karpy.api import parse
from karpy.kube import fake, resources
from karpy.provisioning import provisioner
from karpy.scheduling import pods as scheduling_pods
from karpy.state import facts

ODD = st.sampled_from(
    [None, 5, -1, 2**63, 1.5, True, "", "x", "1e999999999", "-1", [], [None], [5], {}, {"a": None}, "Sideways"]
)
MUTABLE = (resources.NODEPOOLS, resources.NODECLAIMS, resources.NODES, resources.PODS)


def _cluster() -> disruption_world.World:
    w = disruption_world.World()
    w.pool()
    w.pool("spot", capacity_types=("spot",))
    w.node("empty")
    w.node("busy")
    w.pod("app-1", "busy")
    w.node("drifted", conditions=("Drifted",))
    w.pod("app-2", "drifted")
    w.node("spot-node", pool="spot", capacity_type="spot")
    for i in range(3):
        w.pod(f"pending-{i}", "")
        pod: Any = w.kube.obj(resources.PODS, f"pending-{i}", namespace="default")
        del pod["spec"]["nodeName"]
        pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return w


@st.composite
def mutations_of(draw: st.DrawFn) -> list[tuple[resources.Resource, str, tuple[Any, ...], str, Any]]:
    """(resource, object key, path, action, value) to apply to the healthy cluster."""
    w = _cluster()
    out = []
    for _ in range(draw(st.integers(1, 4))):
        res = draw(st.sampled_from(MUTABLE))
        objs = sorted(w.kube.all(res), key=facts.key)
        obj = draw(st.sampled_from(objs))
        path = draw(st.sampled_from(mutations.positions(obj)))
        action = draw(st.sampled_from(["value", "drop", "rename"]))
        out.append((res, facts.key(obj), path, action, copy.deepcopy(draw(ODD))))
    return out


def _mutate(
    w: disruption_world.World, changes: list[tuple[resources.Resource, str, tuple[Any, ...], str, Any]]
) -> None:
    for res, key, path, action, value in changes:
        obj = next((o for o in w.kube.all(res) if facts.key(o) == key), None)
        if obj is None:
            continue
        try:
            parent, last = mutations.parent_of(obj, path), path[-1]
            if action == "value":
                parent[last] = value
            elif isinstance(parent, dict) and last in parent:
                item = parent.pop(last)
                if action == "rename":
                    parent[f"{last}x"] = item
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed the path: nothing to do


def _node_of(pod: Any) -> Any:
    spec = pod.get("spec")
    return spec.get("nodeName") if isinstance(spec, dict) else None


def _reads(res: resources.Resource, obj: Any) -> bool:
    parsers = {
        resources.NODEPOOLS: parse.nodepool,
        resources.NODECLAIMS: parse.nodeclaim,
        resources.PODS: lambda o: scheduling_pods.from_manifest(facts.with_epoch_creation(o)),
    }
    try:
        parsers[res](obj)
    except Exception:
        return False
    return True


@given(mutations_of())
@settings(
    max_examples=hypothesis_profiles.examples(150),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_malformed_objects_affect_only_themselves(
    changes: list[tuple[resources.Resource, str, tuple[Any, ...], str, Any]],
) -> None:
    asyncio.run(_run(changes))


async def _run(changes: list[tuple[resources.Resource, str, tuple[Any, ...], str, Any]]) -> None:
    w = _cluster()
    sink = rejections.MemorySink()
    w.cluster.rejections = sink
    _mutate(w, changes)
    w.sync()  # the watch events: must never raise
    for res in (resources.NODEPOOLS, resources.NODECLAIMS, resources.PODS):
        # A nameless object cannot exist on an API server: the cache skips it with a warning.
        bad = {facts.key(o) for o in w.kube.all(res) if facts.key(o) and not _reads(res, o)}
        assert bad <= {r.key for r in sink.reports if r.kind == res.kind}, f"unreported {res.kind}: {bad}"

    ctrl = w.controller()
    ctrl._deps = type(ctrl._deps)(**{**{f: getattr(ctrl._deps, f) for f in ctrl._deps.__slots__}, "rejections": sink})
    command = await w.reconcile(ctrl, sync=False)
    for candidate in command.candidates if command is not None else ():
        claim = w.kube.obj(resources.NODECLAIMS, candidate.name)
        assert claim is not None
        assert _reads(resources.NODECLAIMS, claim), "disrupted a NodeClaim karpy cannot read"
        on_node = [
            p for p in w.kube.all(resources.PODS) if (p.get("spec") or {}).get("nodeName") == candidate.node_name
        ]
        assert all(_reads(resources.PODS, p) for p in on_node), "disrupted a node holding a pod karpy cannot read"

    kube = fake.FakeKubeClient(w.clock)
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=kube,
            cluster=w.cluster,
            cloud=w.cloud,
            clock=w.clock,
            recorder=events.MemoryRecorder(),
            rejections=sink,
        )
    )
    outcome = await prov.provision()
    readable_pools = {o["metadata"]["name"] for o in w.kube.all(resources.NODEPOOLS) if _reads(resources.NODEPOOLS, o)}
    for created in outcome.created:
        assert created.nodepool in readable_pools
        for key in created.pods:
            ns, name = key.split("/", 1)
            pod = w.kube.obj(resources.PODS, name, namespace=ns)
            assert pod is not None
            assert _reads(resources.PODS, pod)
