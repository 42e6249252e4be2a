"""DryRunClient: reads reach the API server, writes are logged and never stored, answers mirror the real ones."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests import builders

from karpy.kube import client, dryrun, patches, resources, rest

NS = builders.NS


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": 1, "b": {"c": 2, "d": 3}}, {"b": {"c": None, "e": 4}}, {"a": 1, "b": {"d": 3, "e": 4}}),
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),  # lists are replaced whole
        ({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}),
        ({"a": {"b": 1}}, {"a": None, "z": None}, {}),
    ],
)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, expected: Any) -> None:
    assert patches.merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([{"op": "add", "path": "/l/-", "value": 9}], {"m": {"k": "v"}, "l": [1, 2, 9]}),
        ([{"op": "add", "path": "/l/0", "value": 0}], {"m": {"k": "v"}, "l": [0, 1, 2]}),
        ([{"op": "remove", "path": "/l/0"}], {"m": {"k": "v"}, "l": [2]}),
        ([{"op": "replace", "path": "/m/k", "value": "w"}], {"m": {"k": "w"}, "l": [1, 2]}),
        ([{"op": "add", "path": "/m/a~1b", "value": 1}], {"m": {"k": "v", "a/b": 1}, "l": [1, 2]}),
        ([{"op": "move", "from": "/m/k", "path": "/k"}], {"m": {}, "l": [1, 2], "k": "v"}),
        ([{"op": "test", "path": "/m/k", "value": "v"}, {"op": "remove", "path": "/m"}], {"l": [1, 2]}),
    ],
)
def test_json_patch_follows_rfc_6902(ops: list[dict[str, Any]], expected: Any) -> None:
    target = {"m": {"k": "v"}, "l": [1, 2]}
    assert patches.json_patch(target, ops) == expected
    assert target == {"m": {"k": "v"}, "l": [1, 2]}  # the input is not touched


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/m/k", "value": "other"}],
        [{"op": "replace", "path": "/m/missing", "value": 1}],
        [{"op": "remove", "path": "/l/5"}],
        [{"op": "frobnicate", "path": "/m"}],
    ],
)
def test_json_patch_that_does_not_apply_names_the_op(ops: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match=r"patch\[0\]"):
        patches.json_patch({"m": {"k": "v"}, "l": [1, 2]}, ops)


async def test_writes_are_logged_and_not_sent(api: rest.RestClient, caplog: pytest.LogCaptureFixture) -> None:
    await api.create(resources.NODES, builders.node("n1", labels={"a": "1"}))
    await api.create(resources.PODS, builders.pod("p1"))
    dry = dryrun.DryRunClient(api)
    caplog.set_level(logging.INFO, logger=dryrun.__name__)

    created = await dry.create(resources.NODES, builders.node("n2"))
    assert created["metadata"]["name"] == "n2"
    patched = await dry.patch(resources.NODES, "n1", {"metadata": {"labels": {"a": None, "b": "2"}}})
    assert patched["metadata"]["labels"] == {"b": "2"}
    assert await dry.delete(resources.NODES, "n1") is True
    assert await dry.delete(resources.NODES, "ghost") is False
    assert await dry.evict(NS, "p1") is client.EvictionOutcome.EVICTED
    assert await dry.evict(NS, "ghost") is client.EvictionOutcome.NOT_FOUND
    await dry.bind(NS, "p1", "n1")
    with pytest.raises(client.NotFound):
        await dry.patch(resources.NODES, "ghost", {"metadata": {"labels": {"a": "b"}}})

    nodes, _ = await api.list(resources.NODES)
    assert [(n["metadata"]["name"], n["metadata"]["labels"]) for n in nodes] == [("n1", {"a": "1"})]
    pod = await dry.get(resources.PODS, "p1", namespace=NS)
    assert pod is not None
    assert "nodeName" not in pod["spec"]
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("dry run: would create nodes/n2") for m in messages)
    assert any(m.startswith('dry run: would patch nodes/n1: {"metadata"') for m in messages)
    assert "dry run: would bind pod default/p1 to node n1" in messages
