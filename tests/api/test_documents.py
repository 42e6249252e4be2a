"""The bounded YAML reader: JSON values as PyYAML's SafeLoader reads them (timestamps and keys as text), and clear
refusals, with the line, of what the API server's YAML decoding refuses or what would exhaust time or memory."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles, json_strategies

from karpy.api import documents

_NUMBERS = st.integers(-(10**30), 10**30) | st.floats(allow_nan=False, allow_infinity=False)
json_values = json_strategies.trees(
    st.none() | st.booleans() | _NUMBERS | st.text(max_size=20), keys=st.text(max_size=10), width=4, max_leaves=30
)


def bodies(text: str | bytes) -> list[Any]:
    return [d.body for d in documents.load_all(text)]


@given(st.lists(json_values, min_size=1, max_size=3))
@settings(max_examples=hypothesis_profiles.examples(200), derandomize=True)
def test_reads_what_pyyaml_writes_as_pyyaml_reads_it(values: list[Any]) -> None:
    for style in (False, True, None):
        text = yaml.safe_dump_all(values, default_flow_style=style, allow_unicode=True)
        assert bodies(text) == list(yaml.safe_load_all(text))


printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=20)
json_documents = json_strategies.trees(
    st.none() | st.booleans() | _NUMBERS | printable, keys=printable, width=4, max_leaves=30
)


@given(st.lists(json_documents, min_size=1, max_size=3))
@settings(max_examples=hypothesis_profiles.examples(50), derandomize=True)
def test_json_is_read_as_json(values: list[Any]) -> None:
    """JSON is YAML, but for raw control characters and surrogate escapes, which YAML refuses."""
    text = json.dumps(values, ensure_ascii=False)  # YAML has no surrogate-pair escapes: characters as they are
    assert bodies(text) == [json.loads(text)]


def test_pure_python_parser_builds_the_same_values() -> None:
    """Where libyaml is missing the same builder runs on PyYAML's own parser."""
    text = "a: &x {k: [1, 2.5, yes, null, '07']}\nb: *x\nc:\n  <<: *x\n  z: 1\n---\n- 2024-01-01\n"
    loader = yaml.SafeLoader(text)
    try:
        pure = [d.body for d in documents._Builder().documents(loader.get_event)]
    finally:
        loader.dispose()
    assert pure == bodies(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 2024-01-01T00:00:00Z\n", {"a": "2024-01-01T00:00:00Z"}),  # timestamps stay text (sigs.k8s.io/yaml)
        ("{1: a, true: b, null: c, 1.5: d}\n", {"1": "a", "true": "b", "null": "c", "1.5": "d"}),  # keys as text
        ("a: =\n", {"a": "="}),
        ("a: <<\n", {"a": "<<"}),
        ("x: &x {k: v, j: u}\ny:\n  <<: *x\n  k: w\n", {"x": {"k": "v", "j": "u"}, "y": {"k": "w", "j": "u"}}),
        (
            "a: &a {k: 1}\nb: &b {k: 2, j: 2}\nc: {<<: [*a, *b]}\n",
            {"a": {"k": 1}, "b": {"k": 2, "j": 2}, "c": {"k": 1, "j": 2}},
        ),
        ("'<<': x\n", {"<<": "x"}),  # a quoted key is text, not a merge
        ("- !!str 1\n- !!int '2'\n- !!float '3'\n- !!null ''\n- !!bool 'yes'\n", ["1", 2, 3.0, None, True]),
        (b"\xef\xbb\xbfa: 1\n", {"a": 1}),  # a UTF-8 byte-order mark is dropped
    ],
)
def test_values(text: str | bytes, expected: Any) -> None:
    assert bodies(text) == [expected]


def test_empty_documents_keep_their_place() -> None:
    loaded = documents.load_all("---\n---\na: 1\n---\n")
    assert [(d.index, d.line, d.body) for d in loaded] == [(1, 1, None), (2, 2, {"a": 1}), (3, 4, None)]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a: 1\nb: 2\na: 3\n", "line 3: duplicate key 'a'"),
        ("? [a]\n: b\n", "line 1: a mapping key must be a scalar"),
        ("a: &x [1]\n*x : 2\n", "line 2: a mapping key must be a scalar"),
        ("a: *nope\n", "line 1: found undefined alias 'nope'"),
        ("a: !!set {x}\n", "line 1: unsupported tag tag:yaml.org,2002:set"),
        ("a: !!binary aGk=\n", "unsupported tag tag:yaml.org,2002:binary"),
        ("a: !custom x\n", "unsupported tag !custom"),
        ("a: .inf\n", "is not a finite number"),
        ("a: .nan\n", "is not a finite number"),
        ("a: " + "9" * 5000 + "\n", "cannot read '99999"),
        ("<<: [a]\n", "a merge key (<<) takes a mapping or a list of mappings"),
        ("a: 1\n  b: 2\n", "line 2: invalid YAML: mapping values are not allowed"),
        ("a: [1\n", "invalid YAML"),
        ("a: \x07\n", "invalid YAML"),
        (b"a: b\n\xff\n", "line 2: not UTF-8 text: byte 0xff at offset 5"),
        ("[" * 129 + "]" * 129, f"nested more than {documents.MAX_DEPTH} levels deep"),
        ("[" * 1_000_000 + "]" * 1_000_000, "nested more than"),  # libyaml's composer would overflow the C stack
    ],
    ids=lambda v: v[:30] if isinstance(v, str) else None,
)
def test_refusals_name_the_line(text: str | bytes, says: str) -> None:
    with pytest.raises(documents.DocumentError) as caught:
        documents.load_all(text)
    assert says in str(caught.value)
    assert len(str(caught.value)) < 300, "a refusal quotes at most a few characters of the input"


def test_nesting_up_to_the_limit_is_read() -> None:
    depth = documents.MAX_DEPTH
    value: Any = "x"
    for _ in range(depth - 1):
        value = [value]
    assert bodies("[" * (depth - 1) + "x" + "]" * (depth - 1)) == [value]


def _laughs(levels: int, width: int = 9) -> str:
    lines = ['l0: &l0 ["lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_is_refused_before_it_expands() -> None:
    with pytest.raises(documents.DocumentError, match="document contains excessive aliasing"):
        documents.load_all(_laughs(10))  # 9^9 nodes once expanded, from 500 bytes


def test_aliases_in_moderation_are_read_and_shared() -> None:
    loaded = bodies(_laughs(3))  # 9 * 9 leaves: far below the allowance
    assert len(loaded[0]["l2"]) == 9
    assert loaded[0]["l2"][0] is loaded[0]["l1"], "aliases are shared, as PyYAML shares them"


@pytest.mark.parametrize(
    ("expanded", "ratio"), [(1000, 0.99), (400_000, 0.99), (2_200_000, 0.545), (4_000_000, 0.10), (10**8, 0.10)]
)
def test_alias_allowance_is_go_yamls(expanded: int, ratio: float) -> None:
    assert documents.allowed_alias_ratio(expanded) == pytest.approx(ratio)


def test_inputs_past_the_size_limit_are_refused_unread() -> None:
    with pytest.raises(documents.DocumentError, match="more than the 50 MiB"):
        documents.load_all(b"#" * (documents.MAX_BYTES + 1))


def test_libyaml_is_used_when_present() -> None:
    assert hasattr(yaml, "CSafeLoader") == documents.LIBYAML
