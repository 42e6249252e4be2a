"""Fuzz: mutated manifests through the reader and `karpy simulate` (Hypothesis, derandomized, bounded).

Every full run (`make test`) tries the same 1,000 inputs, `make test-fast` a quarter of them: the example manifests,
mutated as structures (a field renamed, retyped or dropped, a value swapped for another type, a list emptied, an
integer pushed to an edge) and as text (lines cut, swapped or duplicated, YAML indicators and bytes that are not UTF-8
spliced in). Asserted for each: `karpy simulate` exits 0 or 2 and never raises; a refusal (2) names the file and a
field or line, says what is wrong in a few lines and is never the catch-all "cannot read this document" (a reader
bug); a plan (0) accounts for every pod it read.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import pathlib
import re
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles, mutations

from karpy import cli
from karpy.api import documents
from karpy.simulate import manifests

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "manifests"
STRUCTURAL_EXAMPLES = hypothesis_profiles.examples(700)
TEXT_EXAMPLES = hypothesis_profiles.examples(300)
FUZZ = settings(
    max_examples=STRUCTURAL_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _documents() -> list[dict[str, Any]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        out += [d.body for d in documents.load_all(path.read_bytes()) if d.body is not None]
    return out


BASE = _documents()
EDGE_VALUES = st.sampled_from(
    [None, True, False, 0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**5000, 0.5, -0.0, 1e308, "", "x", "1e999999999",
     "9Pi", "-1", "NaN", "null", "~", "<<", "*", "&a", "'", '"', "\n", "\x00", "é", [], [None], {}, {"a": None}],
)  # fmt: skip
RENAMES = st.sampled_from(["s", "x", "", "_", "S"])
# libyaml's emitter where PyYAML was built with it: the pure-Python one took half of this file's time.
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@st.composite
def structural_mutants(draw: st.DrawFn) -> list[dict[str, Any]]:
    docs = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 3))):
        target = docs[draw(st.integers(0, len(docs) - 1))]
        path = draw(st.sampled_from(mutations.positions(target)))
        parent, last = mutations.parent_of(target, path), path[-1]
        action = draw(st.sampled_from(["value", "rename", "drop", "empty", "grow"]))
        if action == "value":
            parent[last] = copy.deepcopy(draw(EDGE_VALUES))  # never a shared sample: later steps may change it
        elif action == "rename" and isinstance(last, str):
            parent[last + draw(RENAMES)] = parent.pop(last)
        elif action == "drop" and isinstance(last, str):
            del parent[last]
        elif action == "empty":
            parent[last] = type(parent[last])() if isinstance(parent[last], list | dict) else None
        elif action == "grow" and isinstance(parent[last], list) and parent[last]:
            parent[last] = parent[last] * draw(st.integers(2, 4))
    return docs


def _dump(docs: list[dict[str, Any]]) -> str:
    try:
        return yaml.dump_all(docs, Dumper=DUMPER, sort_keys=False)
    except (ValueError, yaml.YAMLError):  # an integer past Python's 4,300 digits: write the others as JSON
        return "---\n".join(json.dumps(d, default=str) for d in docs if _jsonable(d))


def _jsonable(doc: Any) -> bool:
    try:
        json.dumps(doc)
    except (ValueError, TypeError):
        return False
    return True


TEXT = "\n---\n".join(yaml.safe_dump(d, sort_keys=False) for d in BASE)
SPLICES = st.sampled_from(
    [b"", b"\xff", b"\xc3(", b"\x00", b"- ", b": ", b"&a ", b"*a", b"!!set ", b"<<: ", b"{", b"[", b"'", b'"', b"\t",
     b"---\n", b"...\n", b"%YAML 1.1\n", b"? ", b"|\n", b">-\n", b"#", b"@", b"`", b"\r", b"\xef\xbb\xbf", b"\\u"],
)  # fmt: skip


@st.composite
def text_mutants(draw: st.DrawFn) -> bytes:
    lines = TEXT.encode().split(b"\n")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["splice", "cut", "swap", "copy", "indent"]))
        if action == "splice":
            at = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:at] + draw(SPLICES) + lines[i][at:]
        elif action == "cut":
            del lines[i]
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "copy":
            lines.insert(i, lines[i])
        else:
            lines[i] = b" " * draw(st.integers(1, 3)) + lines[i]
    return b"\n".join(lines)


REFUSAL = re.compile(r"^karpy simulate: (\S+?)(#\d+ \(line \d+\))?: ")


def _simulate(tmp_path: pathlib.Path, data: bytes) -> tuple[int, str, str]:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["simulate", "-f", str(path), "-o", "json", "--catalog", "fake:10"])
    return code, out.getvalue(), err.getvalue()


def _check(tmp_path: pathlib.Path, data: bytes) -> None:
    code, out, err = _simulate(tmp_path, data)
    assert code in (0, 2), err
    if code == 2:
        assert out == ""
        found = REFUSAL.match(err)
        assert found, err
        assert found.group(1) == str(tmp_path / "fuzz.yaml"), err
        assert "cannot read this document" not in err, f"a reader bug, not a refusal: {err}"
        assert "the simulation failed" not in err, f"a scheduler bug, not a refusal: {err}"
        assert len(err.splitlines()) <= 60
        return
    plan = json.loads(out)
    cluster = manifests.load([str(tmp_path / "fuzz.yaml")])
    placed = {p for c in plan["nodeclaims"] for p in c["pods"]} | {p for n in plan["existing_nodes"] for p in n["pods"]}
    placed |= {u["pod"] for u in plan["unschedulable"]}
    assert {p.key for p in cluster.pending} <= placed, "every pending pod is planned or explained"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("fuzz")


@given(structural_mutants())
@FUZZ
def test_structurally_mutated_manifests(workdir: pathlib.Path, docs: list[dict[str, Any]]) -> None:
    _check(workdir, _dump(docs).encode())


@given(text_mutants())
@settings(FUZZ, max_examples=TEXT_EXAMPLES)
def test_textually_mutated_manifests(workdir: pathlib.Path, data: bytes) -> None:
    _check(workdir, data)
