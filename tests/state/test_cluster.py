"""The cluster model's views: parsing and error isolation, pending pods, joins, usage, nominations, marks, seq."""

from __future__ import annotations

import copy
import gc
import weakref

from tests import builders
from tests.state.conftest import add, delete, modify

from karpy import clock
from karpy.kube import resources
from karpy.state import cluster

R = resources


INITIALIZED = builders.condition(
    "Initialized", reason="Initialized", message="", lastTransitionTime="2024-01-01T00:00:00Z"
)


def test_one_invalid_nodepool_does_not_hide_the_others(state: cluster.Cluster) -> None:
    add(state, R.NODEPOOLS, builders.nodepool("good"), builders.nodepool("bad", weight=1000))
    assert [p.metadata.name for p in state.nodepools()] == ["good"]
    errors = state.nodepool_errors()
    assert list(errors) == ["bad"]
    assert "spec.weight" in errors["bad"]
    fixed = builders.nodepool("bad", weight=10)
    modify(state, R.NODEPOOLS, fixed)
    assert [p.metadata.name for p in state.nodepools()] == ["bad", "good"]
    assert state.nodepool_errors() == {}
    delete(state, R.NODEPOOLS, fixed)
    assert [p.metadata.name for p in state.nodepools()] == ["good"]


def test_deleting_nodepools_are_left_out(state: cluster.Cluster) -> None:
    deleting = builders.nodepool("old")
    deleting["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    add(state, R.NODEPOOLS, deleting, builders.nodepool("new"))
    assert [p.metadata.name for p in state.nodepools()] == ["new"]


def test_nodeclasses_and_their_errors(state: cluster.Cluster) -> None:
    add(state, R.EC2NODECLASSES, builders.ec2nodeclass("default"), builders.ec2nodeclass("broken", role=""))
    assert list(state.nodeclasses()) == ["default"]
    assert list(state.nodeclass_errors()) == ["broken"]


def test_pending_pods_follow_binding_and_bad_pods_are_recorded(state: cluster.Cluster) -> None:
    pending = builders.unschedulable(builders.pod("a"))
    add(state, R.PODS, pending, builders.unschedulable(builders.pod("b", namespace="other")))
    bad = builders.pod("bad")
    bad["spec"]["containers"] = "nope"
    add(state, R.PODS, bad)
    assert sorted(p.key for p in state.pending_pods()) == ["default/a", "other/b"]
    assert list(state.pod_errors()) == ["default/bad"]
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = "n1"
    bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    modify(state, R.PODS, bound)
    assert [p.key for p in state.pending_pods()] == ["other/b"]
    assert [p.key for p in state.pods_on("n1")] == ["default/a"]
    done = copy.deepcopy(bound)
    done["status"]["phase"] = "Succeeded"
    modify(state, R.PODS, done)
    assert state.pods_on("n1") == []  # terminal pods hold no capacity
    delete(state, R.PODS, done)
    assert [p.key for p in state.pods()] == ["other/b"]


def test_pods_move_between_nodes_in_the_index(state: cluster.Cluster) -> None:
    add(state, R.PODS, builders.pod("a", node="n1"), builders.pod("b", node="n1"))
    modify(state, R.PODS, builders.pod("a", node="n2"))
    assert [p.name for p in state.pods_on("n1")] == ["b"]
    assert [p.name for p in state.pods_on("n2")] == ["a"]


def test_node_and_nodeclaim_join_by_provider_id_then_node_name(state: cluster.Cluster) -> None:
    add(
        state,
        R.NODECLAIMS,
        builders.nodeclaim("by-pid", provider_id="aws:///z/i-1", capacity={"cpu": "2"}, conditions=[INITIALIZED]),
        builders.nodeclaim("by-name", node_name="ip-2"),
        builders.nodeclaim("in-flight", provider_id="aws:///z/i-3", capacity={"cpu": "8"}),
    )
    add(
        state,
        R.NODES,
        builders.node("ip-1", provider_id="aws:///z/i-1", labels={"karpenter.sh/nodepool": "default"}),
        builders.node("ip-2"),
        builders.node("unmanaged", provider_id="aws:///z/i-9"),
    )
    add(state, R.PODS, builders.pod("web", node="ip-1"))
    nodes = {n.name: n for n in state.state_nodes()}
    assert sorted(nodes) == ["in-flight", "ip-1", "ip-2", "unmanaged"]
    assert (nodes["ip-1"].nodeclaim_name, nodes["ip-1"].initialized, nodes["ip-1"].managed) == ("by-pid", True, True)
    assert nodes["ip-1"].allocatable["cpu"] == 4000  # initialized: the Node's own report wins
    assert [p.name for p in nodes["ip-1"].pods] == ["web"]
    assert nodes["ip-2"].nodeclaim_name == "by-name"
    assert nodes["in-flight"].node is None
    assert nodes["in-flight"].allocatable == {"cpu": 8000}  # not registered: the NodeClaim's view
    assert (nodes["in-flight"].nodepool, nodes["in-flight"].managed) == ("default", True)
    assert nodes["unmanaged"].nodeclaim is None
    assert (nodes["unmanaged"].managed, nodes["unmanaged"].initialized) == (False, True)


def test_a_node_replaced_under_the_same_provider_id_rejoins(state: cluster.Cluster) -> None:
    add(state, R.NODECLAIMS, builders.nodeclaim("c", provider_id="aws:///z/i-1"))
    node = builders.node("ip-1", provider_id="aws:///z/i-1")
    add(state, R.NODES, node)
    delete(state, R.NODES, node)
    assert [(n.name, n.node) for n in state.state_nodes()] == [("c", None)]
    add(state, R.NODES, node)
    assert [n.node_name for n in state.state_nodes()] == ["ip-1"]


def test_nodepool_usage_sums_capacity_and_counts_nodes(state: cluster.Cluster) -> None:
    a = builders.nodeclaim("a", capacity={"cpu": "2", "memory": "4Gi"})
    b = builders.nodeclaim("b", capacity={"cpu": "4"})
    add(state, R.NODECLAIMS, a, b, builders.nodeclaim("x", pool="other", capacity={"cpu": "1"}))
    assert state.nodepool_usage("default") == {"cpu": 6000, "memory": 4 * 1024**3 * 1000, "nodes": 2000}
    modify(state, R.NODECLAIMS, builders.nodeclaim("b", capacity={"cpu": "8"}))
    assert state.nodepool_usage("default")["cpu"] == 10000
    delete(state, R.NODECLAIMS, a)
    assert state.nodepool_usage("default") == {"cpu": 8000, "nodes": 1000}
    assert state.nodepool_usage("missing") == {}


def test_nominations_expire_with_the_clock(state: cluster.Cluster, manual: clock.ManualClock) -> None:
    add(state, R.NODES, builders.node("n1"))
    state.nominate("n1", manual.now() + 20)
    assert state.is_nominated("n1")
    (node,) = state.state_nodes()
    assert node.nominated(manual.now())
    manual.advance(19)
    assert state.is_nominated("n1")
    seq = state.seq
    manual.advance(1)
    assert state.changed_since(seq)  # only time passed, yet n1 is a disruption candidate again: memos must not hold
    assert not state.is_nominated("n1")
    assert state.state_nodes()[0].nominated_until == 0.0
    seq = state.seq
    state.nominate("n1", manual.now() + 20)
    assert state.changed_since(seq)


def test_marks_for_deletion_and_seq(state: cluster.Cluster) -> None:
    add(state, R.NODECLAIMS, builders.nodeclaim("c", provider_id="aws:///z/i-1"))
    add(state, R.NODES, builders.node("ip-1", provider_id="aws:///z/i-1"))
    seq = state.seq
    assert not state.changed_since(seq)
    state.mark_for_deletion("c")  # by NodeClaim name: the joined state node is marked
    assert state.changed_since(seq)
    assert state.state_nodes()[0].marked_for_deletion
    state.unmark_for_deletion("c")
    state.mark_for_deletion("ip-1")  # or by Node name
    assert state.state_nodes()[0].marked_for_deletion
    seq = state.seq
    add(state, R.PODS, builders.pod("p"))
    assert state.changed_since(seq)


def test_views_are_snapshots(state: cluster.Cluster) -> None:
    add(state, R.NODEPOOLS, builders.nodepool("a"))
    add(state, R.PODS, builders.unschedulable(builders.pod("p")))
    state.nodepools().clear()
    state.pending_pods().clear()
    state.nodepool_errors()["x"] = "y"
    assert len(state.nodepools()) == 1
    assert len(state.pending_pods()) == 1
    assert state.nodepool_errors() == {}


def test_synced_waits_for_every_expected_informer(manual: clock.ManualClock) -> None:
    state = cluster.Cluster(clock=manual, expected=(R.NODES, R.PODS))
    assert not state.synced()
    state.mark_listed(R.NODES)
    assert not state.synced()
    state.mark_listed(R.PODS)
    assert state.synced()
    assert not cluster.Cluster(clock=manual).synced()  # nothing expected, nothing listed: not synced


def test_volumes_and_daemonsets_and_pdbs(state: cluster.Cluster) -> None:
    add(state, R.PVCS, {"metadata": {"name": "data", "namespace": "db"}, "spec": {"storageClassName": "gp3"}})
    add(state, R.STORAGECLASSES, {"metadata": {"name": "gp3"}, "volumeBindingMode": "WaitForFirstConsumer"})
    catalog = state.volumes()
    assert catalog.pvcs["db/data"].storage_class_name == "gp3"
    assert catalog.storage_classes["gp3"].binding_mode == "WaitForFirstConsumer"
    ds = {
        "metadata": {"name": "logs", "namespace": "kube-system", "uid": "u"},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    add(state, R.DAEMONSETS, ds)
    assert [p.name for p in state.daemonsets()] == ["logs"]
    add(state, R.PDBS, builders.pdb("web", {"app": "web"}, minAvailable=1))
    assert [p["metadata"]["name"] for p in state.pdbs()] == ["web"]
    add(state, R.VOLUMEATTACHMENTS, {"metadata": {"name": "va-1"}, "spec": {"nodeName": "n1"}})
    assert [v["metadata"]["name"] for v in state.objects(R.VOLUMEATTACHMENTS)] == ["va-1"]


def test_pending_pods_are_oldest_first(state: cluster.Cluster) -> None:
    for name, created in (("young", "2024-01-02T00:00:00Z"), ("old", "2024-01-01T00:00:00Z")):
        pod = builders.unschedulable(builders.pod(name))
        pod["metadata"]["creationTimestamp"] = created
        add(state, R.PODS, pod)
    assert [p.name for p in state.pending_pods()] == ["old", "young"]


def test_a_created_claim_is_in_flight_until_its_launch_resolves(state: cluster.Cluster) -> None:
    assert state.launches_resolved()
    state.record_created(R.NODECLAIMS, builders.nodeclaim("new"))  # the create response, before any watch event
    assert [c.metadata.name for c in state.nodeclaims()] == ["new"]
    assert not state.launches_resolved()  # provisioning and disruption wait: it holds no capacity yet
    modify(state, R.NODECLAIMS, builders.nodeclaim("new", provider_id="aws:///z/i-1", capacity={"cpu": "2"}))
    assert state.launches_resolved()


def test_a_late_creation_response_never_replaces_what_the_watch_delivered(state: cluster.Cluster) -> None:
    add(state, R.NODECLAIMS, builders.nodeclaim("raced", provider_id="aws:///z/i-1", capacity={"cpu": "2"}))
    state.record_created(R.NODECLAIMS, builders.nodeclaim("raced"))  # older: no providerID yet
    (claim,) = state.nodeclaims()
    assert claim.status.provider_id == "aws:///z/i-1"
    assert state.launches_resolved()


def test_an_unchanged_seq_moves_after_five_minutes(state: cluster.Cluster, manual: clock.ManualClock) -> None:
    """Upstream's forced revalidation: "nothing to do" memos keyed on seq cannot hold past five quiet minutes."""
    seq = state.seq
    manual.advance(cluster.FORCED_REVALIDATION - 1)
    assert not state.changed_since(seq)
    manual.advance(1)
    assert state.changed_since(seq)
    moved = state.seq
    manual.advance(cluster.FORCED_REVALIDATION - 1)
    assert not state.changed_since(moved)  # the period restarts when seq moves, forced or not
    state.mark_for_deletion("n1")
    marked = state.seq
    manual.advance(cluster.FORCED_REVALIDATION - 1)
    assert not state.changed_since(marked)


def test_a_csinode_sets_the_volume_limits_of_its_registered_node(state: cluster.Cluster) -> None:
    csinode = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "ip-1"},
        "spec": {
            "drivers": [
                {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                {"name": "efs.csi.aws.com", "nodeID": "i-1"},  # no count: unlimited
            ]
        },
    }
    add(state, R.NODECLAIMS, builders.nodeclaim("in-flight", provider_id="aws:///z/i-3"))
    add(state, R.NODES, builders.node("ip-1"))
    add(state, R.CSINODES, csinode, {**csinode, "metadata": {"name": "in-flight"}})
    nodes = {n.name: n for n in state.state_nodes()}
    assert nodes["ip-1"].volume_limits == {"ebs.csi.aws.com": 25}
    assert nodes["in-flight"].volume_limits == {}  # a claim with no Node yet attaches nothing of its own
    delete(state, R.CSINODES, csinode)
    assert {n.name: n for n in state.state_nodes()}["ip-1"].volume_limits == {}


def test_a_dropped_cluster_is_freed_without_the_cyclic_collector(manual: clock.ManualClock) -> None:
    """`karpy explain` drops a model of the whole cluster when it is done: held in a reference cycle, it would wait
    for (and cost) a full collection, at exit if nothing else."""
    state = cluster.Cluster(clock=manual)
    add(state, R.NODEPOOLS, builders.nodepool("default"))
    add(state, R.NODECLAIMS, builders.nodeclaim("c1", provider_id="aws:///z/i-1"))
    dropped = weakref.ref(state)
    was = gc.isenabled()
    gc.disable()
    try:
        del state
        assert dropped() is None
    finally:
        if was:
            gc.enable()
