"""A NodeClaim read again (`parse.nodeclaim`'s memo): the same object is parsed once, a status write is read without
its spec being validated again, and nothing about what is refused, or how it is reported, changes."""

from __future__ import annotations

import copy
import functools
import json
import types
from typing import Any

import pytest
from tests import builders

from karpy.api import errors, fingerprints, parse

READY = {
    "type": "Ready",
    "status": "True",
    "reason": "Ready",
    "message": "",
    "lastTransitionTime": "2024-01-01T00:00:00Z",
}


@pytest.fixture(autouse=True)
def _empty_memo() -> None:
    parse._claims.clear()
    parse._claim_specs.clear()


# One claim with a spec worth validating (requests, a taint), as the memo's tests read and write it again.
_claim = functools.partial(
    builders.nodeclaim,
    "default-abcde",
    uid="u1",
    resource_version="1",
    requests={"cpu": "1"},
    taints=[{"key": "a", "effect": "NoSchedule"}],
)


def _written(obj: dict[str, Any], version: str, **status: Any) -> dict[str, Any]:
    """`obj` after a status write: the API server's new resourceVersion, the spec as it was."""
    after = copy.deepcopy(obj)
    after["metadata"]["resourceVersion"] = version
    after.setdefault("status", {}).update(status)
    return after


def _problems(obj: dict[str, Any]) -> list[str]:
    with pytest.raises(errors.ValidationError) as info:
        parse.nodeclaim(obj)
    return [str(p) for p in info.value.problems]


def test_the_same_object_is_parsed_once() -> None:
    obj = _claim(provider_id="aws:///us-west-2a/i-1")
    first = parse.nodeclaim(obj)
    assert parse.nodeclaim(copy.deepcopy(obj)) is first  # a LIST's copy of what the watch delivered


def test_a_status_write_reuses_the_spec_and_reads_the_rest() -> None:
    before = parse.nodeclaim(_claim())
    after = parse.nodeclaim(_written(_claim(), "2", providerID="aws:///us-west-2a/i-1", conditions=[READY]))
    assert after.spec is before.spec
    assert after.status.provider_id == "aws:///us-west-2a/i-1"
    assert after.is_true("Ready")
    assert after.metadata.resource_version == "2"
    parse._claims.clear()
    parse._claim_specs.clear()
    assert parse.nodeclaim(_written(_claim(), "2", providerID="aws:///us-west-2a/i-1", conditions=[READY])) == after


def test_a_changed_spec_is_validated_again() -> None:
    """Only the status subresource keeps the spec; an update of the main resource (an API server without the CRD's
    immutability rule, or a cache fed by hand) may change it, and a bad one is refused naming the field."""
    parse.nodeclaim(_claim())
    broken = _written(_claim(), "2")
    broken["spec"]["requirements"][0]["operator"] = "Sometimes"
    assert any(p.startswith("spec.requirements[0].operator") for p in _problems(broken))
    retyped = _written(_claim(), "3")
    retyped["spec"]["taints"][0]["effect"] = True  # equal to nothing it was: a bool is no string
    assert any(p.startswith("spec.taints[0].effect") for p in _problems(retyped))


def test_a_bad_status_is_refused_as_a_full_parse_refuses_it() -> None:
    bad = _written(_claim(), "2", capacity={"cpu": "lots"}, conditions="Ready")
    unremembered = _problems(bad)
    parse.nodeclaim(_claim())  # its spec is now known
    assert _problems(bad) == unremembered
    assert any(p.startswith("status.conditions") for p in unremembered)
    assert any(p.startswith("status.capacity") for p in unremembered)


def test_a_bad_object_is_refused_every_time() -> None:
    bad = _claim()
    bad["spec"]["expireAfter"] = "soon"
    first = _problems(bad)
    assert first
    assert _problems(bad) == first


def test_wrong_api_version_or_kind_is_refused_with_a_known_spec() -> None:
    parse.nodeclaim(_claim())
    moved = _written(_claim(), "2")
    moved["apiVersion"] = "karpenter.sh/v1beta1"
    assert any(p.startswith("apiVersion") for p in _problems(moved))


def test_fingerprints_tell_json_types_apart() -> None:
    prints = {fingerprints.of(v) for v in ({"a": 1}, {"a": 1.0}, {"a": True}, {"a": "1"}, {"a": [1]}, {"a": (1,)})}
    assert len(prints) == 6


def test_fingerprints_match_a_value_from_a_watch_line_and_from_a_list_page() -> None:
    """One decode or many items in one (a LIST page, whose decoder shares keys across its items): the same print."""
    claim = _claim()
    alone = json.loads(json.dumps(claim))
    page = json.loads(json.dumps({"items": [_written(_claim(), "7"), claim, claim]}))["items"]
    assert fingerprints.of(alone) == fingerprints.of(page[1]) == fingerprints.of(page[2])
    assert fingerprints.of(alone["spec"]) == fingerprints.of(page[0]["spec"])
    assert fingerprints.of(alone) != fingerprints.of(page[0])


def test_a_value_without_a_pickle_still_has_a_fingerprint() -> None:
    prints = {fingerprints.of(types.MappingProxyType({"a": n})) for n in (1, 1, 2)}
    assert len(prints) == 2


def test_the_memo_forgets_the_least_recently_used() -> None:
    memo: fingerprints.Memo[str] = fingerprints.Memo(2)
    memo.put(b"a", "A")
    memo.put(b"b", "B")
    assert memo.get(b"a") == "A"
    memo.put(b"c", "C")
    assert (memo.get(b"a"), memo.get(b"b"), memo.get(b"c"), len(memo)) == ("A", None, "C", 2)


class _Counted:
    """A value that counts how often it is pickled (a fingerprint pickles once per pass over the object)."""

    def __init__(self) -> None:
        self.pickles = 0

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        self.pickles += 1
        return (str, ("counted",))


def test_a_miss_pickles_the_spec_once() -> None:
    """The spec is most of a claim: a parse that misses the memo fingerprints it once, for the whole object and for
    itself together (it was twice)."""
    counted = _Counted()
    claim = _claim()
    claim["spec"]["requirements"][0]["values"].append(counted)
    with pytest.raises(errors.ValidationError):  # a value no JSON reader makes: refused, and nothing remembered
        parse.nodeclaim(claim)
    assert counted.pickles == 1


def test_fingerprints_with_a_part_tell_the_part_and_the_rest_apart() -> None:
    whole, spec = fingerprints.with_part({"spec": {"a": 1}, "status": {}}, "spec")
    assert spec == fingerprints.of({"a": 1})
    assert fingerprints.with_part({"status": {}, "spec": {"a": 1}}, "spec") == (whole, spec)  # key order aside
    others = [{"spec": {"a": 1}, "status": {"b": 1}}, {"spec": {"a": 2}, "status": {}}, {"spec": {}, "status": {}}]
    assert whole not in {fingerprints.with_part(o, "spec")[0] for o in others}
