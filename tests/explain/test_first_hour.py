"""`karpy explain` as a first-time user runs it on a dump: without `--now` (evaluated as of the dump's newest
timestamp, and saying so), focused on a pod or a node (the next pass is the full run's), on standard input, and
on input with nothing to explain (exit 3)."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from karpy import cli

DUMP = Path(__file__).resolve().parents[2] / "examples" / "explain" / "cluster.yaml"
NEWEST = "2027-01-15T07:59:50Z"  # the latest condition transition written in the dump
PENDING = "team-8/pending-6d8f7c9b5-000008"


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["explain", "--no-repack", *args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = explain(capsys, *args, "-o", "json")
    assert (code, err) == (0, "")
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_a_dump_is_evaluated_as_of_its_newest_timestamp(capsys: pytest.CaptureFixture[str]) -> None:
    doc = as_json(capsys, "-f", str(DUMP))
    assert doc["now"] == NEWEST
    assert f"evaluated as of {NEWEST}, the dump's newest timestamp (--now sets another time)" in doc["warnings"]
    code, out, _ = explain(capsys, "-f", str(DUMP))
    assert code == 0
    assert out.startswith(f"As of {NEWEST}\n")
    assert not re.search(r"-\d+s ago", out), "an age is never negative"
    # --now still decides
    assert as_json(capsys, "-f", str(DUMP), "--now", "2027-01-16T00:00:00Z")["now"] == "2027-01-16T00:00:00Z"


def test_pod_and_node_give_the_full_runs_next_pass(capsys: pytest.CaptureFixture[str]) -> None:
    full = as_json(capsys, "-f", str(DUMP))
    assert full["next_pass"] is not None, "the dump's next pass deletes a node"
    pod = as_json(capsys, "-f", str(DUMP), "--pod", PENDING)
    assert pod["next_pass"] == full["next_pass"]
    assert [p["pod"] for p in pod["pending"]] == [PENDING]
    assert pod["pending"] == [p for p in full["pending"] if p["pod"] == PENDING]
    assert pod["nodes"] == [], "a pending pod has no node to give a verdict on"
    code, out, _ = explain(capsys, "-f", str(DUMP), "--pod", PENDING)
    assert code == 0
    assert "Next disruption pass: nothing to do" not in out
    assert f"Next disruption pass: {full['next_pass']['method']} deletes {full['next_pass']['nodes'][0]}" in out
    for node in full["nodes"]:
        alone = as_json(capsys, "-f", str(DUMP), "--node", node["name"])
        assert alone["next_pass"] == full["next_pass"]
        (verdict,) = alone["nodes"]
        if node["verdict"] != "not-simulated":  # alone, a node is always simulated
            assert verdict["verdict"] == node["verdict"], node["name"]


def test_a_dump_on_standard_input(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    service = b"---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DUMP.read_bytes() + service)))
    piped = as_json(capsys, "-f", "-")
    from_file = as_json(capsys, "-f", str(DUMP))
    skipped = "skipped 1 document that karpy explain does not read: Service (1) (--strict refuses them)"
    assert piped["warnings"] == [skipped, *from_file["warnings"]]
    assert {**piped, "warnings": []} == {**from_file, "warnings": []}


def test_nothing_to_explain_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# kubectl get ... printed nothing\n")
    assert explain(capsys, "-f", str(empty)) == (
        3,
        "",
        f"karpy explain: {empty}: no objects to explain: the input is empty\n",
    )
    no_pools = tmp_path / "nodes.yaml"
    no_pools.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    code, out, err = explain(capsys, "-f", str(no_pools))
    assert (code, out) == (3, "")
    assert err.startswith(f"karpy explain: {no_pools}: no NodePool: Karpenter launches, consolidates and disrupts")
