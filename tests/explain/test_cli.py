"""`karpy explain` as a user runs it: a dump or a live API server (the emulated one, through a kubeconfig), the JSON
contract and the table, focus on a node or a pod, and exit codes that name what is wrong."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections.abc import Sequence
from typing import Any

import pytest

from karpy import cli
from karpy import clock as karpy_clock
from karpy.explain import sources
from karpy.kube import credentials, rest
from karpy_emulator import dumps
from karpy_emulator.apiserver import runner, server

NOW = "2027-01-15T08:00:00Z"
SHAPE = dumps.Shape(
    nodes=4, pods_per_node=3, pending=1, pending_cpu="1000", guarded_every=4, pinned_every=4, budget="1", now=1.8e9
)
NODE_PRICE = 0.384  # m5.2xlarge on-demand in the bundled catalog
KEYS = {"now", "warnings", "pending", "nodes", "next_pass", "budgets", "repack", "simulations", "static_nodeclaims"}


@pytest.fixture
def dump(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dumps.dump(SHAPE)))
    return str(path)


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["explain", "--now", NOW, *args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = explain(capsys, *args, "-o", "json")
    assert (code, err) == (0, "")
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_the_json_contract(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    doc = as_json(capsys, "-f", dump)
    assert set(doc) == KEYS
    assert doc["now"] == NOW
    (waiting,) = doc["pending"]
    assert not waiting["schedulable"]
    assert waiting["reason"].startswith('incompatible with nodepool "default"')
    assert [(p["nodepool"], p["kind"]) for p in waiting["nodepools"]] == [("default", "resources")]
    assert waiting["existing_nodes"]["total"] == 4
    verdicts = {n["name"]: (n["verdict"], [r["kind"] for r in n["reasons"]]) for n in doc["nodes"]}
    names = sorted(verdicts)
    assert verdicts == {
        names[0]: ("blocked", ["pdb"]),
        names[1]: ("blocked", ["do-not-disrupt"]),
        names[2]: ("disrupt", []),
        names[3]: ("eligible", ["budget"]),  # waits: the next pass spends the pool's budget of one
    }
    step = doc["next_pass"]
    assert (step["method"], step["decision"], step["nodes"]) == ("single-node-consolidation", "delete", [names[2]])
    assert step["savings_per_hour"] == pytest.approx(NODE_PRICE)
    assert {m["to"] for m in step["pods"]} <= {f"node/{n}" for n in names}
    assert doc["budgets"] == {"default": {"Empty": 1, "Drifted": 1, "Underutilized": 1}}
    repack = doc["repack"]
    assert repack["nodes"] == 4
    assert repack["cost_per_hour"] == pytest.approx(4 * NODE_PRICE)
    assert repack["lower_bound_per_hour"] <= repack["repacked_cost_per_hour"]
    assert sum(c["count"] for c in repack["nodeclaims"]) == repack["repacked_nodes"]


def test_the_table_says_the_same_for_people(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    code, out, _ = explain(capsys, "-f", dump)
    assert code == 0
    assert "Pending pods: 1" in out
    assert ": cannot be scheduled\n    nodepool default (resources): requests more than any instance type" in out
    assert '    event text: incompatible with nodepool "default"' in out
    assert "Next disruption pass: single-node-consolidation deletes ip-10-0-2-0.ec2.internal" in out
    assert "PodDisruptionBudget guarded/guarded prevents evicting pod" in out
    assert "Repack: 4 nodes cost $1.5360/h today" in out
    assert " -> node/ip-10-0-" in out  # where the next pass's pods go


def test_focus_on_a_node(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    name = "ip-10-0-2-0.ec2.internal"
    doc = as_json(capsys, "-f", dump, "--node", name, "--simulations", "0")
    assert [n["name"] for n in doc["nodes"]] == [name]
    assert doc["nodes"][0]["simulated"]
    assert (doc["pending"], doc["repack"]) == ([], None)


def test_focus_on_a_pending_pod(capsys: pytest.CaptureFixture[str], dump: str) -> None:
    doc = as_json(capsys, "-f", dump, "--pod", "team-12/pending-6d8f7c9b5-000012")
    assert [p["pod"] for p in doc["pending"]] == ["team-12/pending-6d8f7c9b5-000012"]
    assert doc["nodes"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "ghost"], "node 'ghost' not found"),
        (["--pod", "default/ghost"], "pod 'default/ghost' not found"),
        (["--now", "yesterday"], "--now: not an RFC 3339 time"),
    ],
)
def test_bad_requests_exit_2_saying_why(
    capsys: pytest.CaptureFixture[str], dump: str, args: list[str], message: str
) -> None:
    code, out, err = explain(capsys, "-f", dump, *args)
    assert (code, out) == (2, "")
    assert message in err


def test_a_bad_dump_exits_2_naming_the_file(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: web}\n")
    code, _, err = explain(capsys, "--strict", "-f", str(path))
    assert code == 2
    assert f"{path}#1 (line 2): kind: 'Service' is not read by karpy explain and --strict refuses it" in err


async def seed(url: str, objects: Sequence[dict[str, Any]]) -> None:
    """Create `objects` on the API server at `url`, their status written as a controller writes it."""
    kube = rest.RestClient(credentials.Credentials(url), clock=karpy_clock.SystemClock())
    try:
        for obj in objects:
            res = sources.KINDS[obj["kind"]]
            await kube.create(res, obj)  # as an API server does, it keeps no status from a create
            if "status" in obj:
                meta = obj["metadata"]
                await kube.patch(
                    res,
                    meta["name"],
                    {"status": obj["status"]},
                    namespace=meta.get("namespace", ""),
                    subresource="status",
                )
    finally:
        await kube.close()


def test_a_live_cluster_through_its_kubeconfig_reads_as_its_dump(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as kube:
        asyncio.run(seed(kube.url, dumps.objects(SHAPE)))
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        live = as_json(capsys, "--kubeconfig", str(kubeconfig))
        reads = {(a.verb, a.resource) for a in kube.api.accesses.snapshot() if a.user == "fake-token"}
    offline = as_json(capsys, "-f", dump)
    assert live == offline
    assert {verb for verb, _ in reads} == {"list"}  # read RBAC is all it needs (the seeding went in anonymously)


def test_an_unreachable_cluster_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with runner.KubeAPIRunner() as kube:
        kube.write_kubeconfig(kubeconfig)
    code, _, err = explain(capsys, "--kubeconfig", str(kubeconfig))
    assert code == 1
    assert "cannot list the cluster's objects" in err


@pytest.mark.parametrize(("flag", "price"), [((), NODE_PRICE), (("--node-overlay",), 1.0)])
def test_node_overlays_price_the_nodes_as_the_controller_does_under_its_gate(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, flag: tuple[str, ...], price: float
) -> None:
    """With the NodeOverlay gate the controller prices every offering through the overlays (core:
    cloudprovider/overlay); explain does with --node-overlay, and leaves them out without it, as the controller."""
    doc = dumps.dump(SHAPE)
    doc["items"].append({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "flat-rate"},
        "spec": {
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.2xlarge"]}],
            "price": "1",
        },
    })  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc))
    explained = as_json(capsys, "-f", str(path), *flag)
    assert explained["repack"]["cost_per_hour"] == pytest.approx(4 * price)
    assert explained["next_pass"]["savings_per_hour"] == pytest.approx(price)


def test_an_invalid_overlay_is_left_out_with_a_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    doc = dumps.dump(SHAPE)
    doc["items"].append({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "broken"},
        "spec": {"requirements": [], "price": "cheap"},
    })  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc))
    explained = as_json(capsys, "-f", str(path), "--node-overlay")
    assert any("NodeOverlay broken left out" in w for w in explained["warnings"])
    assert explained["repack"]["cost_per_hour"] == pytest.approx(4 * NODE_PRICE)


def test_a_static_pool_gets_its_replicas_and_a_pending_pod_is_nominated_to_one(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """A static NodePool (`spec.replicas`) gets the NodeClaims the controller's static-pool reconciler creates
    (karpy.static), and a pod only it can take waits for one of them as for a claim in flight."""
    doc = dumps.dump(SHAPE)
    doc["items"].append({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "fixed"},
        "spec": {"replicas": 2, "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
        }}},
    })  # fmt: skip
    doc["items"].append({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pinned", "namespace": "default", "creationTimestamp": "2027-01-15T07:00:00Z"},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": "fixed"},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "lastTransitionTime": "2027-01-15T07:59:00Z"},
        ]},
    })  # fmt: skip
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc))
    explained = as_json(capsys, "-f", str(path))
    claims = explained["static_nodeclaims"]
    assert [(c["name"], c["nodepool"], c["instance_type"]) for c in claims] == [
        ("fixed-1", "fixed", "m5.large"),
        ("fixed-2", "fixed", "m5.large"),
    ]
    (pinned,) = [p for p in explained["pending"] if p["pod"] == "default/pinned"]
    assert (pinned["schedulable"], pinned["node"]) == (True, "fixed-1")
    assert claims[0]["pods"] == ["default/pinned"]
    code, out, _ = explain(capsys, "-f", str(path))
    assert code == 0
    assert "Static NodeClaim fixed-1 of nodepool fixed, m5.large in" in out
