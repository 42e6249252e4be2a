"""CapacityBuffers in `karpy explain`: a dump's (or a live cluster's) buffers sized as the controller sizes them, by
the code `karpy simulate` shares with it (`simulate.buffers`), and their virtual pods in the model as the buffer
controller keeps them: the pending pods' solve gives each its node or NodeClaim, as the provisioner's pass does (a
claim only the room needs says why, in simulate's words), and the disruption pass's simulations keep the room."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import pytest
from tests import builders
from tests.explain import test_cli

from karpy.simulate import buffers
from karpy_emulator import dumps
from karpy_emulator.apiserver import runner, server

NS = "shop"


def _capacity_buffer(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def _chunk_template(cpu: str) -> dict[str, Any]:
    """A PodTemplate `chunk` of one `cpu`-CPU pod."""
    shaped = builders.pod("chunk", namespace=None, labels={"app": "chunk"}, cpu=cpu)
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "chunk", "namespace": NS},
        "template": {"metadata": {"labels": shaped["metadata"]["labels"]}, "spec": shaped["spec"]},
    }


def _objects(*, chunks: int) -> list[dict[str, Any]]:
    """A Deployment with a buffer of two of its pods (scalableRef), `chunks` 7-CPU chunks of a PodTemplate
    (podTemplateRef: one fits beside the pods of each of the dump's four m5.2xlarge nodes), and a buffer naming a
    PodTemplate that does not exist."""
    return [
        builders.deployment("web", 2, namespace=NS, cpu="100m"),
        _capacity_buffer(
            "web-headroom", scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"}, replicas=2
        ),
        _chunk_template("7"),
        _capacity_buffer("big", podTemplateRef={"name": "chunk"}, replicas=chunks),
        _capacity_buffer("lost", podTemplateRef={"name": "nope"}, replicas=1),
    ]


def _dump(tmp_path: pathlib.Path, objects: list[dict[str, Any]]) -> str:
    doc = dumps.dump(test_cli.SHAPE)
    doc["items"] += objects
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_each_buffer_is_sized_and_its_virtual_pods_placed_as_the_provisioner_places_them(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    doc = test_cli.as_json(capsys, "-f", _dump(tmp_path, _objects(chunks=5)), "--no-repack")
    found = {b["name"]: b for b in doc["capacity_buffers"]}
    assert {n: (b["replicas"], b["ready"], b["reason"]) for n, b in found.items()} == {
        "shop/big": (5, True, "Resolved"),
        "shop/lost": (0, False, "PodTemplateNotFound"),
        "shop/web-headroom": (2, True, "Resolved"),
    }
    assert found["shop/lost"]["message"] == 'podtemplates "nope" not found'
    assert found["shop/web-headroom"]["pods"] == [
        "shop/capacity-buffer-web-headroom-1",
        "shop/capacity-buffer-web-headroom-2",
    ]
    # Four chunks fit beside the nodes' pods, one per node; the fifth needs a NodeClaim of its own, which says why.
    chunks = found["shop/big"]["placed"]
    assert sorted(p["node"] for p in chunks[:4]) == sorted(n["name"] for n in doc["nodes"])
    assert chunks[4]["node"] is None
    assert chunks[4]["nodeclaim"]["reason"] == buffers.REASON
    assert chunks[4]["nodeclaim"]["pods"] == ["shop/capacity-buffer-big-5"]
    assert all(p["schedulable"] for b in found.values() for p in b["placed"])
    assert found["shop/lost"]["placed"] == []
    # Virtual pods are no pending pods: the dump's one pending pod is all "pending" lists.
    assert [p["pod"] for p in doc["pending"]] == ["team-12/pending-6d8f7c9b5-000012"]


def test_the_next_disruption_pass_keeps_the_room_the_buffers_ask_for(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """Without the chunks the next pass deletes a node, its pods moving to the others; with one chunk on every node
    it must replace it instead, the replacement keeping a chunk's room (core: disruption's simulations schedule
    the buffers' virtual pods with the pending ones)."""
    free = test_cli.as_json(capsys, "-f", _dump(tmp_path, _objects(chunks=0)), "--no-repack")
    assert free["next_pass"]["decision"] == "delete"
    held = test_cli.as_json(capsys, "-f", _dump(tmp_path, _objects(chunks=4)), "--no-repack")
    step = held["next_pass"]
    assert (step["nodes"], step["decision"]) == (free["next_pass"]["nodes"], "replace")
    (replacement,) = step["replacements"]
    assert [p for p in replacement["pods"] if p.startswith("shop/capacity-buffer-big-")] != []


def test_the_table_lists_the_buffers_in_simulates_words(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    code, out, _ = test_cli.explain(capsys, "-f", _dump(tmp_path, _objects(chunks=5)), "--no-repack")
    assert code == 0
    assert 'shop/lost          0     no     PodTemplateNotFound: podtemplates "nope" not found' in out
    assert "CapacityBuffers' virtual pods: 7" in out
    (fifth,) = [line for line in out.splitlines() if "capacity-buffer-big-5" in line]
    assert fifth.endswith(f": {buffers.REASON}")


def test_a_dump_without_buffers_has_no_buffer_section(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    doc = test_cli.as_json(capsys, "-f", _dump(tmp_path, []), "--no-repack")
    assert "capacity_buffers" not in doc


def test_a_live_cluster_reads_as_its_dump_getting_the_workloads_buffers_name(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """Live, explain LISTs CapacityBuffers and PodTemplates and GETs each workload a buffer names, as the buffer
    controller reads it; the explanation is the dump's."""
    objects = _objects(chunks=5)
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as kube:
        asyncio.run(test_cli.seed(kube.url, [*dumps.objects(test_cli.SHAPE), *objects]))
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        live = test_cli.as_json(capsys, "--kubeconfig", str(kubeconfig), "--no-repack")
        reads = {(a.verb, a.resource) for a in kube.api.accesses.snapshot() if a.user == "fake-token"}
    offline = test_cli.as_json(capsys, "-f", _dump(tmp_path, objects), "--no-repack")
    assert live == offline
    assert ("get", "deployments") in reads
    assert {("list", "capacitybuffers"), ("list", "podtemplates")} <= reads
    assert {verb for verb, _ in reads} == {"list", "get"}


def test_emptiness_leaves_a_node_the_pending_solve_put_a_buffers_room_on(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """A node without pods is empty, unless the provisioner's pass put virtual pods on it: explain's pending solve is
    that pass (core: state/cluster.go UpdateBufferPodCounts, disruption/emptiness.go HasBufferPods)."""
    emptied = "ip-10-0-3-0.ec2.internal"
    doc = dumps.dump(test_cli.SHAPE)
    doc["items"] = [o for o in doc["items"] if not (o["kind"] == "Pod" and o["spec"].get("nodeName") == emptied)]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc))
    free = test_cli.as_json(capsys, "-f", str(path), "--no-repack")
    assert (free["next_pass"]["method"], free["next_pass"]["nodes"]) == ("emptiness", [emptied])
    doc["items"] += _objects(chunks=4)
    path.write_text(json.dumps(doc))
    held = test_cli.as_json(capsys, "-f", str(path), "--no-repack")
    assert held["next_pass"]["method"] != "emptiness"
    (node,) = [n for n in held["nodes"] if n["name"] == emptied]
    assert f'Node "{emptied}" has buffer pods' in [r["message"] for r in node["reasons"]]


def test_a_live_buffer_naming_a_workload_of_another_api_group_is_refused_without_a_get(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """A buffer whose scalableRef names `kind: Deployment` in API group example.com: the controller refuses it
    before any read (core: pkg/utils/apps/resolve.go ResolveScalableRef), so explain GETs nothing for it and says
    what the controller says, although a Deployment of that name exists in the buffer's namespace."""
    objects = [
        builders.deployment("web", 2, namespace=NS, cpu="100m"),
        _capacity_buffer(
            "foreign", scalableRef={"apiGroup": "example.com", "kind": "Deployment", "name": "web"}, replicas=2
        ),
    ]
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as kube:
        asyncio.run(test_cli.seed(kube.url, [*dumps.objects(test_cli.SHAPE), *objects]))
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        live = test_cli.as_json(capsys, "--kubeconfig", str(kubeconfig), "--no-repack")
        reads = {(a.verb, a.resource) for a in kube.api.accesses.snapshot() if a.user == "fake-token"}
    assert ("get", "deployments") not in reads
    (found,) = live["capacity_buffers"]
    assert (found["name"], found["replicas"], found["ready"]) == ("shop/foreign", 0, False)
    assert (found["reason"], found["message"]) == (
        "ResolutionFailed",
        'unsupported scalableRef API group "example.com"',
    )
    assert found["placed"] == []
