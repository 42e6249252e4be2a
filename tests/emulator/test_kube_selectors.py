"""Label and field selector parsing and matching, table-tested against the API server's documented semantics."""

from __future__ import annotations

import pytest

from karpy_emulator.apiserver import selectors

LABELS = {"app": "web", "tier": "front", "rank": "3"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("missing!=x", True),  # != also matches objects without the label
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db, cache)", True),
        ("missing notin (x)", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("rank>2", True),
        ("rank<3", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("app in (web, db),!missing,tier", True),
    ],
)
def test_label_selector(selector: str, expected: bool) -> None:
    assert selectors.labels_match(selectors.parse_labels(selector), LABELS) is expected


@pytest.mark.parametrize("selector", ["app in web", "app=(x)", "=x", "rank>two", "a b"])
def test_bad_label_selector_is_refused(selector: str) -> None:
    with pytest.raises(selectors.SelectorError):
        selectors.parse_labels(selector)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("spec.nodeName=n1", True),
        ("spec.nodeName=", False),
        ("status.phase=", True),  # a missing field compares as ""
        ("spec.unschedulable=true", True),  # booleans compare lowercase
        ("metadata.name=p1,spec.nodeName!=n2", True),
    ],
)
def test_field_selector(selector: str, expected: bool) -> None:
    obj = {"metadata": {"name": "p1"}, "spec": {"nodeName": "n1", "unschedulable": True}}
    assert selectors.fields_match(selectors.parse_fields(selector), obj) is expected


@pytest.mark.parametrize(
    ("label_selector", "labels", "expected"),
    [
        ({"matchLabels": {"app": "web"}}, {"app": "web"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, {"app": "web"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "web"}, False),
        ({}, {"anything": "x"}, True),  # an empty selector selects everything
    ],
)
def test_label_selector_object(label_selector: dict[str, object], labels: dict[str, str], expected: bool) -> None:
    assert selectors.labels_match(selectors.from_label_selector(label_selector), labels) is expected
