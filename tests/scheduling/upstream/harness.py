"""Upstream Karpenter's scheduling tests as data: load a case, run it through karpy, check what it expects.

A case file (`cases/*.yaml`) holds one YAML document:

    source: pkg/controllers/provisioning/scheduling/suite_test.go   # the upstream file the cases come from
    catalog: default        # default | fake:N | assorted | {assorted_without: {label: value}} |
                            # [instance type, ...] (see `catalogs.catalog`)
    base: [manifest, ...]   # prepended to every case that sets no `nodepools: own`
    cases:
      - it: Describe / Context / It text, as upstream names it
        manifests: [manifest, ...]          # Kubernetes documents (Pod, NodePool, Node, NodeClaim, ...)
        settings: {preferencePolicy: Ignore, minValuesPolicy: BestEffort}
        paths: [simulate, controller]       # default: both
        expect: {...}                       # see `check`

Manifests are Kubernetes documents as a user writes them, with a few conveniences: `apiVersion` may be left out for
core kinds, a Pod without `spec.containers` gets one container requesting nothing (upstream's test pod), a Pod may
carry `replicas: N` (not a Pod field) for N copies named `<name>-0` .. `<name>-N-1`, a claim (or a pod's ephemeral
claim template) or volume without access modes and size gets ReadWriteOnce and 10Gi (upstream's test claims), and
the simulate path adds the EC2NodeClass `default` the NodePools name. A top-level `anchors` entry is ignored: it
holds YAML anchors the cases refer to.
Pods with no `spec.nodeName` are pending (unschedulable); a Pod with one is bound to that node.

Every case runs through both of karpy's entry points unless `paths` says otherwise:

* `simulate`: the documents written to a file and read by `karpy simulate`'s reader (`karpy.simulate.manifests`),
  planned by `karpy.simulate.plan.scheduling_input` and the scheduler;
* `controller`: the documents applied to the controller's cluster-state model (`karpy.state.cluster`) as its
  informers would apply them, then one pass of the real provisioner (`karpy.provisioning.provisioner`), its solve
  captured, NodeClaims created through an in-memory API client.

Expectations do not name prices or options lists: they say which pods are placed, on how many nodes, together or
apart, and which labels (or capacity) the node a pod lands on has, as upstream's `ExpectScheduled` reads them from
the launched Node: a new claim's labels are its single-valued requirements over its cheapest option's labels and
cheapest offering's zone and capacity type.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from tests.scheduling.upstream import catalogs

from karpy import events, rejections
from karpy import settings as karpy_settings
from karpy.api import labels, quantity
from karpy.clock import ManualClock
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, fake, resources
from karpy.provisioning import provisioner
from karpy.scheduling import results, scheduler
from karpy.simulate import manifests, plan
from karpy.state import cluster as state_cluster
from karpy.state import informer

CASES = Path(__file__).parent / "cases"
# libyaml's safe loader where PyYAML was built with it: the case files are read at every collection, 6x faster.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
PATHS = ("simulate", "controller")
_CORE_KINDS = {"Pod": "v1", "Node": "v1", "PersistentVolumeClaim": "v1", "PersistentVolume": "v1"}
_RESOURCE_OF_KIND = {
    "NodePool": resources.NODEPOOLS,
    "NodeClaim": resources.NODECLAIMS,
    "Node": resources.NODES,
    "Pod": resources.PODS,
    "DaemonSet": resources.DAEMONSETS,
    "PersistentVolumeClaim": resources.PVCS,
    "PersistentVolume": resources.PVS,
    "StorageClass": resources.STORAGECLASSES,
    "CSINode": resources.CSINODES,
}
_NODE_CLASS: Mapping[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-test",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
    },
}
_EXPECTATIONS = frozenset(
    {
        "scheduled",
        "unschedulable",
        "new_nodeclaims",
        "nodes",
        "same_node",
        "different_nodes",
        "node_labels",
        "distinct_labels",
        "capacity",
        "nominated",
        "skew",
        "pods_per_node",
        "reason",
        "cheapest",
        "options",
        "options_at_least",
        "options_hold",
        "effective_zones",
    }
)


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    source: str
    it: str
    catalog: Any
    manifests: tuple[Mapping[str, Any], ...]
    expect: Mapping[str, Any]
    settings: Mapping[str, str]
    paths: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{Path(self.source).name}: {self.it}"


# --- loading ----------------------------------------------------------------------------------------------------
def _expand(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    body = copy.deepcopy(dict(doc))
    kind = str(body.get("kind", ""))
    if kind in _CORE_KINDS:
        body.setdefault("apiVersion", _CORE_KINDS[kind])
    if kind == "PersistentVolumeClaim":
        _claim_defaults(body.setdefault("spec", {}))
    if kind == "PersistentVolume":
        spec = body.setdefault("spec", {})
        spec.setdefault("accessModes", ["ReadWriteOnce"])
        spec.setdefault("capacity", {"storage": "10Gi"})
    if kind != "Pod":
        return [body]
    body["metadata"] = {"namespace": "default", **(body.get("metadata") or {})}
    body["spec"] = {"containers": [{"name": "app", "image": "pause"}], **(body.get("spec") or {})}
    for volume in body["spec"].get("volumes") or ():
        template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
        if template is not None:
            _claim_defaults(template.setdefault("spec", {}))
    replicas = body.pop("replicas", None)
    if replicas is None:
        return [body]
    out = []
    for i in range(int(replicas)):
        one = copy.deepcopy(body)
        one["metadata"]["name"] = f"{body['metadata']['name']}-{i}"
        out.append(one)
    return out


def _claim_defaults(spec: dict[str, Any]) -> None:
    """What upstream's test claims always carry (test.PersistentVolumeClaim) and the API server requires."""
    spec.setdefault("accessModes", ["ReadWriteOnce"])
    spec.setdefault("resources", {"requests": {"storage": "10Gi"}})


def load(path: Path) -> list[Case]:
    data = yaml.load(path.read_text(), Loader=_LOADER)
    unknown = set(data) - {"source", "catalog", "base", "cases", "anchors"}
    assert not unknown, f"{path}: unknown keys {sorted(unknown)}"
    out = []
    for raw in data["cases"]:
        unknown = set(raw) - {"it", "catalog", "manifests", "expect", "settings", "paths", "base"}
        assert not unknown, f"{path}: {raw.get('it')}: unknown keys {sorted(unknown)}"
        expect = raw.get("expect") or {}
        assert expect, f"{path}: {raw['it']}: a case must expect something"
        assert set(expect) <= _EXPECTATIONS, f"{path}: {raw['it']}: unknown expectations {set(expect) - _EXPECTATIONS}"
        base = data.get("base") or [] if raw.get("base", True) else []
        docs = [d for doc in [*base, *(raw.get("manifests") or [])] for d in _expand(doc)]
        out.append(
            Case(
                source=data["source"],
                it=raw["it"],
                catalog=raw.get("catalog", data.get("catalog", "default")),
                manifests=tuple(docs),
                expect=expect,
                settings=raw.get("settings") or {},
                paths=tuple(raw.get("paths") or PATHS),
            )
        )
    return out


def all_cases() -> list[Case]:
    return [case for path in sorted(CASES.glob("*.yaml")) for case in load(path)]


# --- running ----------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """Where each pod went: node ids are `claim/<i>` for new claims and the node's name for existing ones."""

    placed: Mapping[str, str]
    unschedulable: Mapping[str, str]
    node_labels: Mapping[str, Mapping[str, str]]
    capacity: Mapping[str, Mapping[str, int]]
    claims: int
    bound: Mapping[str, str]  # pods bound before the solve -> their node
    price: Mapping[str, float]  # new claim -> its cheapest offering's price
    options: Mapping[str, tuple[types.InstanceType, ...]]  # new claim -> the instance types it offers
    requests: Mapping[str, Mapping[str, int]]  # new claim -> its pods' requests and daemon overhead
    effective_zones: Mapping[str, int]  # effective zone -> pending pods there (the provisioner's report, if it ran)


def _policies(case: Case) -> karpy_settings.SchedulingSettings:
    """The case's PREFERENCE_POLICY and MIN_VALUES_POLICY (upstream's defaults where it sets none)."""
    return karpy_settings.SchedulingSettings(
        preference_policy=karpy_settings.PreferencePolicy(case.settings.get("preferencePolicy", "Respect")),
        min_values_policy=karpy_settings.MinValuesPolicy(case.settings.get("minValuesPolicy", "Strict")),
    )


def run_simulate(case: Case, tmp: Path) -> tuple[results.Results, scheduler.SchedulingInput]:
    path = tmp / "case.yaml"
    # Upstream's suites apply their NodePools' node class in the background; karpy simulate asks for it in the file.
    path.write_text(yaml.safe_dump_all([*case.manifests, _NODE_CLASS]))
    cluster = manifests.load([str(path)])
    options = plan.Options(scheduling=_policies(case))
    types_ = catalogs.catalog(case.catalog)
    inp = plan.scheduling_input(cluster, options, {pool.name: types_ for pool in cluster.nodepools})
    return scheduler.solve(inp), inp


def _controller_state(case: Case) -> state_cluster.Cluster:
    state = state_cluster.Cluster(clock=ManualClock())
    for res in informer.INFORMED:
        state.mark_listed(res)
    for doc in case.manifests:
        res = _RESOURCE_OF_KIND.get(str(doc.get("kind")))
        assert res is not None, f"{case.id}: the controller path cannot take a {doc.get('kind')}"
        obj = copy.deepcopy(dict(doc))
        if res is resources.PODS and not (obj.get("spec") or {}).get("nodeName"):
            obj["status"] = {  # what kube-scheduler leaves on a pod it could not place
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            }
        state.apply(res, client.WatchEvent(client.ADDED, obj))
    return state


class _ZonesReported(provisioner.Metrics):
    """Keeps the pending pods per effective zone the provisioner reports."""

    def __init__(self, into: dict[str, int]) -> None:
        self._into = into

    def pending_by_effective_zone(self, counts: Mapping[str, int]) -> None:
        self._into.update(counts)


async def run_controller(case: Case) -> tuple[results.Results, scheduler.SchedulingInput, Mapping[str, int]]:
    """The solve of one provisioner pass, its input, and the pending pods per effective zone it reported."""
    state = _controller_state(case)
    captured: list[tuple[results.Results, scheduler.SchedulingInput]] = []
    reported: dict[str, int] = {}

    def solve(inp: scheduler.SchedulingInput) -> results.Results:
        out = scheduler.solve(dataclasses.replace(inp, compute_lower_bound=True))
        captured.append((out, inp))
        return out

    settings = provisioner.Settings(scheduling=_policies(case))
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=fake.FakeKubeClient(state.clock),
            cluster=state,
            cloud=fake_provider.FakeCloudProvider(catalogs.catalog(case.catalog)),
            clock=state.clock,
            recorder=events.MemoryRecorder(),
            rejections=rejections.Discard(),
            settings=settings,
            solver=solve,
            metrics=_ZonesReported(reported),
        )
    )
    done = await prov.provision()
    if not captured:  # nothing pending: nothing to solve
        return results.Results(), scheduler.SchedulingInput(pods=(), nodepools=(), instance_types={}), reported
    (found,) = captured
    assert len(done.created) == len(found[0].new_nodeclaims), "every planned claim was created"
    return (*found, reported)


def outcome(
    res: results.Results, inp: scheduler.SchedulingInput, *, reported: Mapping[str, int] | None = None
) -> Outcome:
    """`reported`: the pending pods per effective zone a provisioner reported; else counted from the solve."""
    placed: dict[str, str] = {}
    node_labels: dict[str, dict[str, str]] = {}
    capacity: dict[str, dict[str, int]] = {}
    for node in inp.existing_nodes:
        node_labels[node.name] = {labels.LABEL_HOSTNAME: node.name, **node.labels}
        capacity[node.name] = dict(node.allocatable)
    for name, on_node in res.existing_nodes.items():
        placed.update({p.key: name for p in on_node})
    price: dict[str, float] = {}
    options: dict[str, tuple[types.InstanceType, ...]] = {}
    requests: dict[str, dict[str, int]] = {}
    for i, claim in enumerate(res.new_nodeclaims):
        node = f"claim/{i}"
        placed.update({p.key: node for p in claim.pods})
        options[node] = tuple(claim.instance_type_options)
        requests[node] = dict(claim.requests)
        resolved: dict[str, str] = {}
        if claim.cheapest is not None:
            price[node] = claim.cheapest.price
            cheapest = next(t for t in claim.instance_type_options if t.name == claim.cheapest.instance_type)
            resolved.update(cheapest.labels)
            resolved[labels.LABEL_ZONE] = claim.cheapest.zone
            resolved[labels.LABEL_CAPACITY_TYPE] = claim.cheapest.capacity_type
            capacity[node] = dict(cheapest.capacity)
        for key, req in claim.requirements.items():
            values = req.values()
            if key != labels.LABEL_HOSTNAME and values is not None and len(values) == 1:
                resolved[key] = next(iter(values))
        resolved[labels.LABEL_HOSTNAME] = node
        node_labels[node] = resolved
    bound = {p.key: p.node_name for n in inp.existing_nodes for p in n.pods}
    bound.update({p.key: p.node_name for p in inp.bound_pods if p.node_name})
    zones = reported if reported is not None else {zone: len(ps) for zone, ps in res.effective_zones.items()}
    return Outcome(
        placed, dict(res.unschedulable), node_labels, capacity, len(res.new_nodeclaims), bound, price, options,
        requests, dict(zones),
    )  # fmt: skip


# --- expectations -----------------------------------------------------------------------------------------------
def _key(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def _names(spec: Any, out: Outcome, case: Case) -> list[str]:
    """A pod list: names, or `all` (every pending pod of the case)."""
    if spec == "all":
        return [
            _key(f"{(d.get('metadata') or {}).get('namespace', 'default')}/{d['metadata']['name']}")
            for d in case.manifests
            if d.get("kind") == "Pod" and not (d.get("spec") or {}).get("nodeName")
        ]
    return [_key(n) for n in spec]


def _node_of(pod: str, out: Outcome) -> str:
    key = _key(pod)
    node = out.placed.get(key) or out.bound.get(key)
    assert node is not None, f"{key} has no node: {out.unschedulable.get(key, 'not in the solve')}"
    return node


def _selects(selector: Mapping[str, str], doc: Mapping[str, Any]) -> bool:
    pod_labels = (doc.get("metadata") or {}).get("labels") or {}
    return all(pod_labels.get(k) == v for k, v in selector.items())


def check(case: Case, out: Outcome) -> None:
    exp = case.expect
    if "scheduled" in exp:
        missing = {p: out.unschedulable.get(p, "?") for p in _names(exp["scheduled"], out, case) if p not in out.placed}
        assert not missing, f"expected scheduled: {missing}"
    if "unschedulable" in exp:
        wrong = [p for p in _names(exp["unschedulable"], out, case) if p in out.placed]
        assert not wrong, f"expected unschedulable, but placed: {[(p, out.placed[p]) for p in wrong]}"
    if "new_nodeclaims" in exp:
        assert out.claims == exp["new_nodeclaims"], f"new nodeclaims: {out.claims}, expected {exp['new_nodeclaims']}"
    if "nodes" in exp:  # distinct nodes holding the case's pods (pending ones placed, bound ones where they are)
        used = set(out.placed.values()) | set(out.bound.values())
        assert len(used) == exp["nodes"], f"nodes used: {sorted(used)}, expected {exp['nodes']}"
    for group in exp.get("same_node", []):
        nodes = {_node_of(p, out) for p in group}
        assert len(nodes) == 1, f"{group} should share a node, got {nodes}"
    for group in exp.get("different_nodes", []):
        nodes = [_node_of(p, out) for p in group]
        assert len(set(nodes)) == len(nodes), f"{group} should be on different nodes, got {nodes}"
    for pod, wanted in (exp.get("node_labels") or {}).items():
        have = out.node_labels[_node_of(pod, out)]
        for key, value in wanted.items():
            if value is None:
                assert key not in have, f"{pod}: node has {key}={have.get(key)}, expected no such label"
            elif isinstance(value, list):
                assert have.get(key) in value, f"{pod}: node has {key}={have.get(key)}, expected one of {value}"
            else:
                assert have.get(key) == str(value), f"{pod}: node has {key}={have.get(key)}, expected {value}"
    for key, pods in (exp.get("distinct_labels") or {}).items():
        values = [out.node_labels[_node_of(p, out)].get(key) for p in pods]
        assert len(set(values)) == len(values), f"{pods} should have distinct {key}: {values}"
    for pod, wanted in (exp.get("capacity") or {}).items():
        have = out.capacity[_node_of(pod, out)]
        for name, amount in wanted.items():
            assert have.get(name) == quantity.parse(amount), f"{pod}: node {name}={have.get(name)}, expected {amount}"
    for node, pods in (exp.get("nominated") or {}).items():
        got = sorted(p for p, n in out.placed.items() if n == node)
        assert got == sorted(_key(p) for p in pods), f"nominated to {node}: {got}, expected {pods}"
    for skew in exp.get("skew", []):
        counts: collections.Counter[str] = collections.Counter()
        for doc in case.manifests:
            if doc.get("kind") != "Pod" or not _selects(skew["labels"], doc):
                continue
            key = _key(f"{doc['metadata'].get('namespace', 'default')}/{doc['metadata']['name']}")
            node = out.placed.get(key) or out.bound.get(key)
            if node is not None:
                counts[out.node_labels[node].get(skew["key"], "")] += 1
        assert sorted(counts.values()) == sorted(skew["counts"]), f"skew over {skew['key']}: {dict(counts)}"
    if "pods_per_node" in exp:
        per_node = collections.Counter(out.placed.values())
        assert sorted(per_node.values()) == sorted(exp["pods_per_node"]), f"pods per node: {dict(per_node)}"
    if "cheapest" in exp:  # as instance_selection_test.go's minPrice: the cheapest offering of the whole catalog
        lowest = min(o.price for t in catalogs.catalog(case.catalog) for o in t.offerings)
        for pod in exp["cheapest"]:
            node = _node_of(pod, out)
            assert out.price.get(node) == lowest, f"{pod}: node price {out.price.get(node)}, catalog's lowest {lowest}"
    for pod, wanted in (exp.get("options") or {}).items():
        for t in out.options[_node_of(pod, out)]:
            _expect_option(t, wanted)
    for pod, least in (exp.get("options_at_least") or {}).items():
        offered = [t.name for t in out.options[_node_of(pod, out)]]
        assert len(offered) >= least, f"{pod}: its claim offers {offered}, expected at least {least}"
    for pod in exp.get("options_hold", []):  # every type offered holds the claim's pods and daemon overhead
        node = _node_of(pod, out)
        for t in out.options[node]:
            short = {r: v for r, v in out.requests[node].items() if v > t.allocatable.get(r, 0)}
            assert not short, f"{pod}: {t.name} cannot hold {short} (allocatable {dict(t.allocatable)})"
    if "effective_zones" in exp:  # karpenter_scheduler_pending_pods_by_effective_zone_count after the solve
        assert out.effective_zones == exp["effective_zones"], f"pending pods by effective zone: {out.effective_zones}"
    for pod, text in (exp.get("reason") or {}).items():
        assert text in out.unschedulable.get(_key(pod), ""), f"{pod}: {out.unschedulable.get(_key(pod))!r}"


def _expect_option(t: types.InstanceType, wanted: Mapping[str, str]) -> None:
    """An offered type matches as upstream's ExpectInstancesWithLabel / ExpectInstancesWithOffering read it: a zone
    or capacity type is one of its offerings' (both at once when both are given), any other key is its label."""
    zone, capacity_type = wanted.get(labels.LABEL_ZONE), wanted.get(labels.LABEL_CAPACITY_TYPE)
    if zone is not None or capacity_type is not None:
        assert any(zone in (None, o.zone) and capacity_type in (None, o.capacity_type) for o in t.offerings), (
            f"{t.name}: no offering in zone {zone} of capacity type {capacity_type}"
        )
    for key, value in wanted.items():
        if key not in (labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE):
            assert t.labels.get(key) == value, f"{t.name}: {key}={t.labels.get(key)}, expected {value}"
