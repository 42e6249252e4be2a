"""The NodeClaim index by providerID (and node name): kept by the informer's add / update / delete events."""

from __future__ import annotations

from tests import builders
from tests.state.conftest import add, delete, modify

from karpy.kube import resources
from karpy.state import cluster

R = resources
I1 = "aws:///us-east-1a/i-1"
I2 = "aws:///us-east-1b/i-2"


def _names(state: cluster.Cluster, provider_id: str) -> list[str]:
    return [c.name for c in state.nodeclaims_for_provider_id(provider_id)]


def test_added_claim_is_found_by_its_provider_id(state: cluster.Cluster) -> None:
    add(
        state,
        R.NODECLAIMS,
        builders.nodeclaim("a", provider_id=I1),
        builders.nodeclaim("b", provider_id=I2),
        builders.nodeclaim("launching"),
    )
    assert _names(state, I1) == ["a"]
    assert _names(state, I2) == ["b"]
    assert _names(state, "aws:///us-east-1a/i-9") == []
    assert _names(state, "") == []  # a claim still launching has no id and is never found by ""


def test_update_moves_the_claim_to_its_new_provider_id(state: cluster.Cluster) -> None:
    add(state, R.NODECLAIMS, builders.nodeclaim("a"))
    assert _names(state, I1) == []
    modify(state, R.NODECLAIMS, builders.nodeclaim("a", provider_id=I1))  # launched
    assert _names(state, I1) == ["a"]
    modify(state, R.NODECLAIMS, builders.nodeclaim("a", provider_id=I2))
    assert _names(state, I1) == []
    assert _names(state, I2) == ["a"]
    # The index hands out the claim as last seen, not the one it was indexed with.
    modify(state, R.NODECLAIMS, builders.nodeclaim("a", provider_id=I2, node_name="ip-2"))
    (found,) = state.nodeclaims_for_provider_id(I2)
    assert found.status.node_name == "ip-2"


def test_delete_forgets_the_claim(state: cluster.Cluster) -> None:
    claim = builders.nodeclaim("a", provider_id=I1, node_name="ip-1")
    add(state, R.NODECLAIMS, claim)
    delete(state, R.NODECLAIMS, claim)
    assert _names(state, I1) == []
    assert state.nodeclaims_for_node(builders.node("ip-1", provider_id=I1)) == []


def test_two_claims_racing_for_one_id_are_both_kept_until_each_goes(state: cluster.Cluster) -> None:
    first, second = builders.nodeclaim("b-first", provider_id=I1), builders.nodeclaim("a-second", provider_id=I1)
    add(state, R.NODECLAIMS, first, second)
    assert _names(state, I1) == ["a-second", "b-first"]  # all of them, by name: the caller decides
    # The one indexed last leaving must not take the other with it (a one-slot index would forget "b-first").
    delete(state, R.NODECLAIMS, second)
    assert _names(state, I1) == ["b-first"]
    add(state, R.NODECLAIMS, second)
    # ... nor must one moving away.
    modify(state, R.NODECLAIMS, builders.nodeclaim("b-first", provider_id=I2))
    assert _names(state, I1) == ["a-second"]
    assert _names(state, I2) == ["b-first"]


def test_an_invalid_update_drops_the_claim_from_the_index(state: cluster.Cluster) -> None:
    add(state, R.NODECLAIMS, builders.nodeclaim("a", provider_id=I1))
    broken = builders.nodeclaim("a", provider_id=I1)
    broken["spec"]["requirements"] = "not a list"
    modify(state, R.NODECLAIMS, broken)
    assert "a" in state.nodeclaim_errors()
    assert _names(state, I1) == []


def test_node_lookup_by_provider_id_then_node_name(state: cluster.Cluster) -> None:
    add(
        state,
        R.NODECLAIMS,
        builders.nodeclaim("by-pid", provider_id=I1, node_name="other"),
        builders.nodeclaim("by-name", node_name="ip-2"),
    )
    assert [c.name for c in state.nodeclaims_for_node(builders.node("ip-1", provider_id=I1))] == ["by-pid"]
    # No claim names the Node's providerID (or it has none): its name decides.
    assert [c.name for c in state.nodeclaims_for_node(builders.node("ip-2", provider_id=I2))] == ["by-name"]
    assert [c.name for c in state.nodeclaims_for_node(builders.node("ip-2"))] == ["by-name"]
    assert state.nodeclaims_for_node(builders.node("unmanaged", provider_id="aws:///z/i-9")) == []
