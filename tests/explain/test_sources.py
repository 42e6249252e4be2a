"""Reading a cluster for explain: dumps in YAML or JSON, Lists (typed or not) or one document per object, with every
problem naming its file and document; and the model built from them, as the controller's informers build it."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml

from karpy import clock as karpy_clock
from karpy.api import nodeclaim
from karpy.explain import sources
from karpy_emulator import dumps

SHAPE = dumps.Shape(nodes=2, pods_per_node=2, pending=1)


def write(path: pathlib.Path, text: str) -> str:
    path.write_text(text, encoding="latin-1" if path.name.startswith("latin") else "utf-8")
    return str(path)


def kinds(snap: sources.Snapshot) -> dict[str, int]:
    return {res.kind: len(objs) for res, objs in snap.objects.items()}


EXPECTED = {"NodePool": 1, "EC2NodeClass": 1, "NodeClaim": 2, "Node": 2, "Pod": 5}


def test_a_json_list_a_yaml_list_and_yaml_documents_read_the_same(tmp_path: pathlib.Path) -> None:
    items = list(dumps.objects(SHAPE))
    as_json = write(tmp_path / "dump.json", json.dumps(dumps.dump(SHAPE)))
    as_yaml_list = write(tmp_path / "list.yaml", yaml.safe_dump(dumps.dump(SHAPE)))
    as_documents = write(tmp_path / "docs.yml", yaml.safe_dump_all(items))
    for path in (as_json, as_yaml_list, as_documents):
        assert kinds(sources.read_dump([path])) == EXPECTED, path


def test_typed_lists_lend_their_kind_to_their_items(tmp_path: pathlib.Path) -> None:
    pods = [o for o in dumps.objects(SHAPE) if o["kind"] == "Pod"]
    for pod in pods:
        del pod["kind"]
    path = write(tmp_path / "pods.json", json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods}))
    assert kinds(sources.read_dump([path])) == {"Pod": 5}


def test_a_directory_reads_every_manifest_in_it(tmp_path: pathlib.Path) -> None:
    write(tmp_path / "a.json", json.dumps(dumps.dump(SHAPE)))
    write(tmp_path / "b.yaml", yaml.safe_dump(dumps.pdb("web", "default", "web")))
    write(tmp_path / "notes.txt", "not a manifest")
    assert kinds(sources.read_dump([str(tmp_path)])) == {**EXPECTED, "PodDisruptionBudget": 1}


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.json", '{"kind": "List", "items": [', r"bad\.json: invalid JSON"),
        ("nameless.yaml", "kind: Node\nmetadata: {}\n", r"nameless\.yaml#1 \(line 2\): metadata\.name: required"),
        ("list.json", '{"kind": "List", "items": {}}', r"list\.json#1: items: a List needs a list of items"),
        ("item.json", '{"kind": "List", "items": [{"kind": "Node"}, 3]}', r"item\.json#1 items\[0\]: metadata"),
        ("kindless.yaml", "metadata: {name: x}\n", r"kindless\.yaml#1 \(line 1\): kind: required"),
        ("deep.json", "[" * 100_000, r"deep\.json: invalid JSON"),
        ("latin.json", '{"kind": "Node", "metadata": {"name": "\xe9"}}', r"latin\.json: not UTF-8"),
    ],
)
def test_bad_input_names_the_file_the_document_and_the_field(
    tmp_path: pathlib.Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(sources.InputError, match=message):
        sources.read_dump([path])


DUMP_WITH_A_NAMELESS_NODE = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: ip-10-0-1-1
  - apiVersion: v1
    kind: Node
    metadata:
      labels: {a: b}
"""


def test_an_error_in_a_yaml_dump_names_the_fields_own_line(tmp_path: pathlib.Path) -> None:
    """The line of the field at fault, inside a List item, as `karpy simulate` names it (one code path:
    `simulate.manifests.Document.at`); not the line the document starts on."""
    path = write(tmp_path / "dump.yaml", DUMP_WITH_A_NAMELESS_NODE)
    with pytest.raises(sources.InputError) as caught:
        sources.read_dump([path])
    # `name` is not written: the line of the deepest part that is, the item's `metadata`
    assert str(caught.value) == f"{path}#1 items[1] (line 10): metadata.name: required"


def test_an_object_left_out_of_a_yaml_dump_is_warned_about_at_the_line_of_its_bad_field(
    tmp_path: pathlib.Path,
) -> None:
    objects = list(dumps.objects(SHAPE))
    objects[0]["spec"]["disruption"]["consolidateAfter"] = "soon"
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False)
    path = write(tmp_path / "dump.yaml", text)
    _, warnings = sources.to_cluster(sources.read_dump([path]), clock=karpy_clock.ManualClock(SHAPE.now))
    (warning,) = warnings
    line = next(n for n, row in enumerate(text.splitlines(), start=1) if "consolidateAfter: soon" in row)
    assert warning.startswith(f"{path}#1 items[0] (line {line}): NodePool default left out")


def _cluster(objects: list[dict[str, Any]], *, now: float) -> tuple[Any, list[str]]:
    snap = sources.Snapshot()
    for obj in objects:
        snap.add(sources.KINDS[obj["kind"]], obj, f"dump.json items[{obj['metadata']['name']}]")
    return sources.to_cluster(snap, clock=karpy_clock.ManualClock(now))


def test_objects_the_controller_would_leave_out_are_warned_about_with_their_source() -> None:
    objects = list(dumps.objects(SHAPE))
    objects[0]["spec"]["disruption"]["consolidateAfter"] = "soon"
    cluster, warnings = _cluster(objects, now=SHAPE.now)
    assert cluster.nodepools() == []
    (warning,) = warnings
    assert warning.startswith("dump.json items[default]: NodePool default left out")
    assert "consolidateAfter" in warning


def test_consolidatable_is_brought_up_to_the_evaluation_time() -> None:
    objects = list(dumps.objects(SHAPE))
    claims = [o for o in objects if o["kind"] == "NodeClaim"]
    for claim in claims:  # as a controller that stopped before consolidateAfter passed left them
        claim["status"]["conditions"] = [c for c in claim["status"]["conditions"] if c["type"] != "Consolidatable"]
    claims[1]["status"]["lastPodEventTime"] = "2027-01-15T07:59:50Z"  # a pod changed 10 s before `now`
    cluster, _ = _cluster(objects, now=1_800_000_000.0)  # 2027-01-15T08:00:00Z; consolidateAfter 30 s
    ready = {c.name: c.is_true(nodeclaim.CONSOLIDATABLE) for c in cluster.nodeclaims()}
    assert ready == {claims[0]["metadata"]["name"]: True, claims[1]["metadata"]["name"]: False}
