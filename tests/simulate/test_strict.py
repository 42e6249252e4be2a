"""`karpy simulate` on bad input: exit 2 with the file, the document, its line and the field, never a traceback;
nothing that the API server refuses is read in silently, and input that would exhaust time or memory is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.simulate import builders

from karpy import cli
from karpy.api import documents
from karpy.scheduling import scheduler
from karpy.simulate import manifests, plan

POD = """apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  containers: [{{name: c, image: x, resources: {resources}}}]
{extra}
"""
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: d}}
spec:
  {extra}
  selector: {{matchLabels: {{app: d}}}}
  template:
    metadata: {{labels: {{app: {label}}}}}
    spec:
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
"""


def pod(extra: str = "", resources: str = "{requests: {cpu: 1}}") -> str:
    return POD.format(extra=extra, resources=resources)


def deployment(extra: str = "replicas: 3", label: str = "d") -> str:
    return DEPLOYMENT.format(extra=extra, label=label)


def laughs() -> str:
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    rows += [f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi", strict=True)]
    return "kind: Pod\n" + "\n".join(rows) + "\n"


# Each message names the line the field is written on (the document's own first line is where a document starts).
CASES = [
    # The inputs that printed a traceback (exit 1):
    ("alias bomb", laughs(), "line 5: document contains excessive aliasing"),
    ("non-UTF-8", b"apiVersion: v1\nkind: Pod\nmetadata: {name: \xff}\n", "line 3: not UTF-8 text"),
    ("5,000-deep", "kind: Pod\nmetadata: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 128 levels deep"),
    ("cpu: [1]", pod(resources="{requests: {cpu: [1]}}"), "#1 (line 5): invalid Pod 'p'"),
    (
        "Node labels: [a]",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: [a]}\n",
        "metadata.labels: must be an object",
    ),
    (
        "Node allocatable: x",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: x}\n",
        "status.allocatable: must be an object",
    ),
    (
        "PVC spec: [1]",
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\nspec: [1]\n",
        "spec: must be an object",
    ),
    (
        "StorageClass allowedTopologies: x",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: s}\nprovisioner: p\n"
        "allowedTopologies: x\n",
        "allowedTopologies: must be a list",
    ),
    (
        "volumeClaimTemplates: [oops]",
        deployment().replace("Deployment", "StatefulSet") + "  volumeClaimTemplates: [oops]\n",
        "spec.volumeClaimTemplates[0]: must be an object",
    ),
    (
        "replicas: 1000000",
        deployment("replicas: 1000000"),
        "spec.replicas: 1,000,000 more pod(s) would bring the simulation past 200,000 pods",
    ),
    ("replicas: 100000000", deployment("replicas: 100000000"), "spec.replicas: 100,000,000 more pod(s)"),
    # The inputs that changed the simulation silently (exit 0):
    (
        "maxSkew: 0",
        pod("  topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]"),
        "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero",
    ),
    (
        "negative request",
        pod(resources="{requests: {cpu: -1}}"),
        "spec.containers[0].resources.requests[cpu]: must be greater than or equal to 0",
    ),
    (
        "requsts",
        pod(resources="{requsts: {cpu: 1}}"),
        'spec.containers[0].resources.requsts: unknown field (did you mean "requests"?)',
    ),
    ("replica: 50", deployment("replica: 50"), 'spec.replica: unknown field (did you mean "replicas"?)'),
    ("no apiVersion", pod().replace("apiVersion: v1\n", ""), 'apiVersion: Required value: must be "v1" for a Pod'),
    (
        "wrong apiVersion",
        deployment().replace("apps/v1", "v1"),
        'apiVersion: must be "apps/v1" for a Deployment, got "v1"',
    ),
    (
        "pod without containers",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
        "spec.containers: Required value",
    ),
    (
        "deployment without containers",
        deployment().replace("containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]", "containers: []"),
        "spec.template.spec.containers: Required value",
    ),
    (
        "selector does not match",
        deployment(label="other"),
        "spec.template.metadata.labels: `selector` does not match template `labels`",
    ),
    (
        "minDomains: 0",
        pod(
            "  topologySpreadConstraints:\n"
            "  - {maxSkew: 1, minDomains: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}"
        ),
        "minDomains: must be greater than zero",
    ),
    (
        "empty nodeSelectorTerms",
        pod("  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: []}}}"),
        "nodeSelectorTerms: Required value",
    ),
    (
        "NodePool without its EC2NodeClass",
        builders.POOL,
        "bad.yaml#1 (line 8): spec.template.spec.nodeClassRef.name: EC2NodeClass 'default' is not in the manifests",
    ),
    (
        "duplicate EC2NodeClass",
        builders.NODECLASS,
        "bad.yaml#1 (line 4): metadata.name: EC2NodeClass default is defined more than once (first in",
    ),
    (
        "duplicate NodePool",
        builders.POOL,
        "bad.yaml#1 (line 4): metadata.name: NodePool default is defined more than once (first in",
    ),
    (
        "duplicate Pod",
        pod() + "---\n" + pod(),
        "bad.yaml#2 (line 10): metadata.name: Pod default/p is defined more than once",
    ),
]


@pytest.mark.parametrize(("what", "content", "says"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_naming_file_document_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, content: str | bytes, says: str
) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(builders.NODEPOOL if "NodePool without" not in what else builders.NODECLASS.replace("default", "x"))
    if isinstance(content, bytes):
        bad.write_bytes(content)
    else:
        bad.write_text(content)
    code = cli.main(["simulate", "-f", str(good), "-f", str(bad), "-o", "json"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, ""), err
    assert f"karpy simulate: {bad}" in err, "the message names the file"
    assert says in err
    assert "Traceback" not in err
    assert len(err) < 2000, "the message quotes little of the input"


def test_quantities_of_any_magnitude_make_the_pod_unschedulable_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text(
        builders.NODEPOOL
        + "---\n"
        + pod(resources="{requests: {cpu: '1e999999999'}}")
        + "---\n"
        + pod(resources="{requests: {memory: 9Pi}}").replace("name: p", "name: q")
        + "---\n"
        + pod(resources="{requests: {cpu: null, memory: 1Gi}}").replace("name: p", "name: fine")  # null: zero
    )
    code = cli.main(["simulate", "-f", str(tmp_path), "-o", "json", "--catalog", "fake:20"])
    out, err = capsys.readouterr()
    assert code == 0, err
    plan = json.loads(out)
    reasons = {u["pod"]: u["reason"] for u in plan["unschedulable"]}
    assert set(reasons) == {"default/p", "default/q"}
    assert '"memory":"9Pi"' in reasons["default/q"]
    assert [p for c in plan["nodeclaims"] for p in c["pods"]] == ["default/fine"]


def test_manifests_past_the_size_limit_are_refused_before_reading(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(builders.NODEPOOL)
    (tmp_path / "b.yaml").write_bytes(b"#" * documents.MAX_BYTES)
    with pytest.raises(manifests.InputError, match="the manifests exceed 50 MiB in all"):
        manifests.load([str(tmp_path)])


def test_pods_stamped_from_one_template_are_each_their_own_pod(tmp_path: Path) -> None:
    """The reader reads a template once (`_read`): each pod still has its own name and uid, and a pod whose
    generic ephemeral volume is named after it keeps its own claim."""
    ephemeral = "  volumes: [{name: scratch, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}]"  # noqa: E501
    docs = [pod().replace("name: p", f"name: p{i}") for i in range(3)]
    docs += [pod(ephemeral).replace("name: p", f"name: e{i}") for i in range(2)]
    (tmp_path / "m.yaml").write_text(builders.NODEPOOL + "---\n" + "---\n".join(docs))
    cluster = manifests.load([str(tmp_path)])
    assert [(p.name, p.uid) for p in cluster.pending[:3]] == [(f"p{i}", f"default/p{i}") for i in range(3)]
    assert [p.pvc_names for p in cluster.pending[3:]] == [("e0-scratch",), ("e1-scratch",)]


class _Jumping:
    """A clock on which every reading is a minute after the last: the solve's deadline passes at once."""

    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        self.t += 60.0
        return self.t

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("the simulation never sleeps")


def test_the_simulation_stops_at_its_deadline_with_every_pod_accounted_for(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(builders.NODEPOOL + "---\n" + deployment("replicas: 50"))
    cluster = manifests.load([str(tmp_path)])
    result = plan.run(cluster, plan.Options(catalog="fake:10", solve_timeout=30.0), clock=_Jumping())
    assert result.timed_out
    assert set(result.unschedulable.values()) == {scheduler.TIMED_OUT}
    assert len(result.unschedulable) + sum(len(c.pods) for c in result.new_nodeclaims) == 50


def test_an_error_names_the_line_of_its_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    arch = "        - key: kubernetes.io/arch\n          operator: Equals\n          values: [amd64]\n"
    text = builders.NODEPOOL + arch
    (tmp_path / "pool.yaml").write_text(text)
    assert cli.main(["simulate", "-f", str(tmp_path / "pool.yaml")]) == 2
    err = capsys.readouterr().err
    line = next(i for i, row in enumerate(text.splitlines(), start=1) if "operator: Equals" in row)
    assert line == 22  # not 12, where the NodePool's document starts
    assert err.startswith(f"karpy simulate: {tmp_path / 'pool.yaml'}#2 (line {line}): invalid NodePool 'default'")
    assert "spec.template.spec.requirements[1].operator: unsupported operator" in err
