"""`sharing.interned`: a copy whose equal strings are one object, the input untouched."""

from __future__ import annotations

import json

from karpy.state import sharing


def test_equal_strings_of_separately_decoded_documents_become_one() -> None:
    text = json.dumps({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    first, second = json.loads(text), json.loads(text)
    assert first["status"]["phase"] is not second["status"]["phase"]
    one, other = sharing.interned(first), sharing.interned(second)
    assert one == first
    assert other == second
    assert one["status"]["phase"] is other["status"]["phase"]
    assert one["status"]["conditions"][0]["status"] is other["status"]["conditions"][0]["status"]
    assert next(iter(one["status"]["conditions"][0])) is next(iter(other["status"]["conditions"][0]))


def test_the_input_is_copied_not_changed() -> None:
    original = {"a": [{"b": "c"}], "n": 1, "f": 1.5, "t": True, "z": None}
    snapshot = json.loads(json.dumps(original))
    copied = sharing.interned(original)
    assert copied == original == snapshot
    assert copied is not original
    assert copied["a"] is not original["a"]
    assert copied["a"][0] is not original["a"][0]
