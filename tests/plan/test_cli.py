"""`karpy plan` as a user runs it: a proposal over a dump (the explain tests' synthetic cluster) or over a live API
server (the emulated one, through a kubeconfig); the JSON contract, the table, exit codes a CI gate reads, and bad
proposals refused naming the file, document, line and field."""

from __future__ import annotations

import asyncio
import json
import pathlib
from typing import Any

import pytest
import yaml

from karpy import cli
from karpy import clock as karpy_clock
from karpy.api import labels
from karpy.explain import sources
from karpy.kube import credentials, rest
from karpy_emulator import dumps
from karpy_emulator.apiserver import runner, server

NOW = "2027-01-15T08:00:00Z"
SHAPE = dumps.Shape(nodes=4, pods_per_node=3, guarded_every=4, pinned_every=4, budget="1", now=1.8e9)
NODE_PRICE = 0.384  # m5.2xlarge on-demand in the bundled catalog
FAMILY = "karpenter.k8s.aws/instance-family"


@pytest.fixture
def dump(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dumps.dump(SHAPE)))
    return str(path)


def propose(tmp_path: pathlib.Path, *objects: dict[str, Any], name: str = "proposal.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def templated(**template_spec: Any) -> dict[str, Any]:
    body = dumps.nodepool(SHAPE)
    body["spec"]["template"]["spec"].update(template_spec)
    return body


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["plan", "--now", NOW, *args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str, code: int = 2) -> dict[str, Any]:
    found, out, err = plan(capsys, *args, "-o", "json")
    assert (found, err) == (code, "")
    doc: dict[str, Any] = json.loads(out)
    return doc


SCHEMA: dict[str, Any] = {
    "now": str,
    "disruptive": bool,
    "warnings": [str],
    "nodepools": [
        {
            "name": str,
            "change": str,
            "nodes": int,
            "drifts": int,
            "may_drift": int,
            "deleted": int,
            "budgets": [str],
            "waves": [
                {
                    "start": str,
                    "nodes": int,
                    "duration_seconds": float,
                    "held_by": [{"pdb": str, "pods": int, "allowed": int, "seconds": float}],
                }
            ],
            "largest_wave": int,
            "finish": (str, type(None)),
            "blocked": int,
            "unlaunchable": (str, type(None)),
        }
    ],
    "nodes": [
        {
            "name": str,
            "nodeclaim": str,
            "nodepool": str,
            "outcome": str,
            "reason": (str, type(None)),
            "message": str,
            "fields": [str],
            "pods": int,
            "holds": [{"kind": str, "message": str}],
        }
    ],
    "pods_moved": int,
    "unschedulable": [{"pod": str, "reason": str}],
    "capacity": {
        k: {"nodes": int, "cpu": float, "memory_gib": float, "cost_per_hour": float} for k in ("before", "after")
    },
    "nodeclaims": [dict],
}


def conforms(value: Any, schema: Any, path: str = "$") -> None:
    """`value` has exactly the keys and types of `schema` (a dict of keys, a one-item list, or types)."""
    if isinstance(schema, dict):
        assert isinstance(value, dict), path
        assert set(value) == set(schema), f"{path}: {sorted(value)} != {sorted(schema)}"
        for key, sub in schema.items():
            conforms(value[key], sub, f"{path}.{key}")
    elif isinstance(schema, list):
        assert isinstance(value, list), path
        for i, item in enumerate(value):
            conforms(item, schema[0], f"{path}[{i}]")
    else:
        assert isinstance(value, schema), f"{path}: {value!r} is not {schema}"


def test_the_json_contract_of_a_template_change(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    doc = as_json(capsys, "-f", propose(tmp_path, templated(expireAfter="360h")), "--dump", dump)
    conforms(doc, SCHEMA)
    assert doc["disruptive"]
    (default,) = doc["nodepools"]
    assert (default["change"], default["nodes"], default["drifts"], default["budgets"]) == ("changed", 4, 4, ["1"])
    assert [w["nodes"] for w in default["waves"]] == [1, 1, 1, 1]  # a budget of one node: one at a time
    assert default["waves"][0]["start"] == NOW
    assert default["finish"] == "2027-01-15T08:20:00Z"  # four replacements of the default 5m each
    assert {(n["outcome"], n["reason"], tuple(n["fields"])) for n in doc["nodes"]} == {
        ("drifts", "NodePoolDrifted", ("spec.template.spec.expireAfter",))
    }
    held = {n["name"]: [h["kind"] for h in n["holds"]] for n in doc["nodes"] if n["holds"]}
    assert sorted(held.values()) == [["do-not-disrupt"], ["pdb"]]  # the guarded and the pinned node
    assert doc["pods_moved"] == 12
    assert doc["capacity"]["before"]["nodes"] == 4
    assert doc["capacity"]["before"]["cost_per_hour"] == pytest.approx(4 * NODE_PRICE)
    assert doc["unschedulable"] == []
    assert sum(len(c["pods"]) for c in doc["nodeclaims"]) == 12


def test_a_pdb_allowing_fewer_evictions_than_a_wave_needs_makes_it_longer(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    # The nodes' unguarded, unpinned pods become one app whose PDB allows one eviction at a time: each wave (one
    # node, under budget "1") waits an eviction round per pod beyond the first.
    cluster = dumps.dump(SHAPE)
    for item in cluster["items"]:
        meta = item["metadata"]
        if item["kind"] == "Pod" and meta["labels"]["app"].startswith("app-"):
            meta["namespace"], meta["labels"]["app"] = "web", "web"
    web = dumps.pdb("web", "web", "web")
    web["status"]["disruptionsAllowed"] = 1
    cluster["items"].append(web)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(cluster))
    doc = as_json(capsys, "-f", propose(tmp_path, templated(expireAfter="360h")), "--dump", str(path))
    conforms(doc, SCHEMA)
    (default,) = doc["nodepools"]
    # Nodes 0 and 1 keep one pod each out of the app (the guarded and the pinned one): 2, 2, 3, 3 web pods.
    assert [[(h["pdb"], h["pods"], h["allowed"]) for h in w["held_by"]] for w in default["waves"]] == [
        [("web/web", 2, 1)],
        [("web/web", 2, 1)],
        [("web/web", 3, 1)],
        [("web/web", 3, 1)],
    ]
    assert [w["duration_seconds"] for w in default["waves"]] == [360.0, 360.0, 420.0, 420.0]
    assert default["finish"] == "2027-01-15T08:26:00Z"  # 4 replacements of 5m plus 6 eviction rounds of 1m
    code, out, _ = plan(
        capsys, "-f", propose(tmp_path, templated(expireAfter="360h")), "--dump", str(path), "--eviction-time", "2m"
    )
    assert code == 2
    assert "wave at 2027-01-15T08:23:00Z: PDB web/web lets 1 of its 3 pods go at a time: +240s assumed" in out


def test_an_unchanged_pool_disrupts_nothing_and_exits_0(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    doc = as_json(capsys, "-f", propose(tmp_path, templated()), "--dump", dump, code=0)
    assert not doc["disruptive"]
    assert {n["outcome"] for n in doc["nodes"]} == {"none"}
    assert doc["capacity"]["after"] == doc["capacity"]["before"]
    assert doc["nodepools"][0]["waves"] == []


def test_a_requirement_no_instance_type_meets_leaves_pods_unschedulable(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    narrowed = templated()
    narrowed["spec"]["template"]["spec"]["requirements"].append({"key": FAMILY, "operator": "In", "values": ["q9"]})
    doc = as_json(capsys, "-f", propose(tmp_path, narrowed), "--dump", dump)
    (default,) = doc["nodepools"]
    assert default["unlaunchable"].startswith("no instance type of its EC2NodeClass meets the requirements")
    assert {n["reason"] for n in doc["nodes"]} == {"RequirementsDrifted"}
    assert len(doc["unschedulable"]) == 12
    assert doc["capacity"]["after"]["nodes"] == 0


def test_deleting_the_pool_deletes_its_nodes(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    doc = as_json(capsys, "-f", propose(tmp_path, templated()), "--delete", "--dump", dump)
    (default,) = doc["nodepools"]
    assert (default["change"], default["deleted"], default["waves"]) == ("deleted", 4, [])
    assert {n["outcome"] for n in doc["nodes"]} == {"deleted"}
    assert len(doc["unschedulable"]) == 12  # no pool is left to launch for them


def test_deleting_the_node_class_leaves_its_pool_unable_to_launch(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    doc = as_json(capsys, "-f", propose(tmp_path, dumps.nodeclass(SHAPE)), "--delete", "--dump", dump)
    (default,) = doc["nodepools"]
    assert default["unlaunchable"] == "its EC2NodeClass default does not exist"
    assert {n["outcome"] for n in doc["nodes"]} == {"none"}  # its nodes run on until they go for another reason


def test_a_node_class_change_by_id_is_resolved_and_by_tags_may_drift(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    nodeclass = dumps.nodeclass(SHAPE)
    nodeclass["spec"]["amiSelectorTerms"] = [{"id": "ami-0123456789abcdef0"}]  # what the nodes run
    nodeclass["spec"]["amiFamily"] = "AL2023"
    nodeclass["spec"]["securityGroupSelectorTerms"] = [{"tags": {"team": "a"}}]
    doc = as_json(capsys, "-f", propose(tmp_path, nodeclass), "--dump", dump, "--no-aws")
    assert {(n["outcome"], n["reason"]) for n in doc["nodes"]} == {("may-drift", "SecurityGroupDrifted")}
    assert doc["nodepools"][0]["may_drift"] == 4


def test_the_table_says_the_same_for_people(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    code, out, _ = plan(capsys, "-f", propose(tmp_path, templated(expireAfter="360h")), "--dump", dump)
    assert code == 2
    assert "NodePool default (changed): 4 nodes, 4 drift" in out
    assert "4 waves of at most 1 under budgets 1; done by 2027-01-15T08:20:00Z" in out
    assert "held: PodDisruptionBudget guarded/guarded prevents evicting pod" in out
    assert f"$/h {4 * NODE_PRICE:.2f} → " in out


@pytest.mark.parametrize(
    ("document", "written", "expected"),
    [
        (
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}},
            "kind: Service",
            "kind: 'Service' is not something karpy plan proposes",
        ),
        (templated(expireAfter="forever"), "expireAfter: forever", "invalid NodePool 'default'"),
        (
            templated(nodeClassRef={"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "gone"}),
            "name: gone",
            "spec.template.spec.nodeClassRef.name: EC2NodeClass 'gone' is neither in the cluster",
        ),
    ],
)
def test_a_bad_proposal_exits_1_naming_file_document_line_and_field(
    capsys: pytest.CaptureFixture[str],
    dump: str,
    tmp_path: pathlib.Path,
    document: dict[str, Any],
    written: str,
    expected: str,
) -> None:
    path = propose(tmp_path, dumps.nodeclass(SHAPE), document)  # the second document is the bad one
    text = pathlib.Path(path).read_text().splitlines()
    line = 1 + next(i for i, found in enumerate(text) if found.strip() == written)
    code, out, err = plan(capsys, "-f", path, "--dump", dump)
    assert (code, out) == (1, "")
    assert err.startswith(f"karpy plan: {path}#2 (line {line}): {expected}"), err


async def seed(url: str, shape: dumps.Shape = SHAPE) -> None:
    """The API server at `url` holds the objects of `shape`'s dump, statuses included (as a running cluster's)."""
    kube = rest.RestClient(credentials.Credentials(url), clock=karpy_clock.SystemClock())
    try:
        for obj in dumps.objects(shape):
            res = sources.KINDS[obj["kind"]]
            await kube.create(res, obj)
            if "status" in obj:
                meta = obj["metadata"]
                namespace = meta.get("namespace", "")
                status = {"status": obj["status"]}
                await kube.patch(res, meta["name"], status, namespace=namespace, subresource="status")
    finally:
        await kube.close()


def test_a_live_cluster_plans_as_its_dump_with_read_access_only(
    capsys: pytest.CaptureFixture[str], dump: str, tmp_path: pathlib.Path
) -> None:
    proposal = propose(tmp_path, templated(expireAfter="360h"))
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as kube:
        asyncio.run(seed(kube.url))
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        live = as_json(capsys, "-f", proposal, "--kubeconfig", str(kubeconfig))
        reads = {a.verb for a in kube.api.accesses.snapshot() if a.user == "fake-token"}
    offline = as_json(capsys, "-f", proposal, "--dump", dump)
    assert live == offline
    assert reads == {"list"}
