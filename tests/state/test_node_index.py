"""The Node index by spec.providerID (the NodeClaim lifecycle's lookup): kept by the informer's events."""

from __future__ import annotations

from tests import builders
from tests.state.conftest import add, delete, modify

from karpy.kube import resources
from karpy.state import cluster

R = resources
I1 = "aws:///us-east-1a/i-1"
I2 = "aws:///us-east-1b/i-2"


def _names(state: cluster.Cluster, provider_id: str) -> list[str]:
    return [n["metadata"]["name"] for n in state.nodes_for_provider_id(provider_id)]


def test_nodes_are_found_by_their_provider_id(state: cluster.Cluster) -> None:
    add(state, R.NODES, builders.node("ip-1", provider_id=I1), builders.node("ip-2", provider_id=I2))
    add(state, R.NODES, builders.node("no-id"))
    assert _names(state, I1) == ["ip-1"]
    assert _names(state, I2) == ["ip-2"]
    assert _names(state, "") == []
    assert _names(state, "aws:///us-east-1a/i-9") == []


def test_an_update_moves_the_node_and_a_delete_forgets_it(state: cluster.Cluster) -> None:
    add(state, R.NODES, builders.node("ip-1"))
    modify(state, R.NODES, builders.node("ip-1", provider_id=I1))
    assert _names(state, I1) == ["ip-1"]
    modify(state, R.NODES, builders.node("ip-1", provider_id=I2))
    assert _names(state, I1) == []
    (found,) = state.nodes_for_provider_id(I2)
    assert found["spec"]["providerID"] == I2
    delete(state, R.NODES, builders.node("ip-1", provider_id=I2))
    assert _names(state, I2) == []


def test_two_nodes_with_one_id_are_both_found_until_each_goes(state: cluster.Cluster) -> None:
    """The lifecycle reports MultipleNodesFound on two: the index must not keep only the last."""
    first, second = builders.node("ip-b", provider_id=I1), builders.node("ip-a", provider_id=I1)
    add(state, R.NODES, first, second)
    assert _names(state, I1) == ["ip-a", "ip-b"]
    delete(state, R.NODES, second)
    assert _names(state, I1) == ["ip-b"]
