"""OpenAPI v3 through the real kubectl: `kubectl explain`, and `kubectl apply` with its default `--validate=strict`
(which failed with "failed to download openapi" before). The documents come from the schemas karpy reads objects
with (the charts' CRDs, `karpy.api.corekinds.json`), so kubectl and karpy agree on what a field is."""

from __future__ import annotations

import json
import pathlib
import urllib.request

from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator.apiserver import runner

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "manifests"
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: nginx}]}
"""


def test_explain_reads_a_crd_schema(kubectl: emulator_kubectl.Kubectl) -> None:
    text = kubectl("explain", "nodepool.spec.disruption")
    assert "KIND:       NodePool" in text
    assert "consolidateAfter\t<string> -required-" in text
    assert "budgets\t<[]Object>" in text


def test_explain_reads_a_core_kind(kubectl: emulator_kubectl.Kubectl) -> None:
    text = kubectl("explain", "pod.spec.containers")
    assert "FIELD: containers <[]Container>" in text
    assert "image\t<string>" in text


def test_apply_validates_strictly_on_the_server(kubectl: emulator_kubectl.Kubectl) -> None:
    assert kubectl("apply", "-f", "-", stdin=DEPLOYMENT) == "deployment.apps/web created\n"
    typo = kubectl.run("apply", "-f", "-", stdin=DEPLOYMENT.replace("replicas: 1", "replicaz: 1"), check=False)
    assert typo.code == 1
    assert 'strict decoding error: unknown field "spec.replicaz"' in typo.err
    nodeclass = (EXAMPLES / "00-ec2nodeclass.yaml").read_text()
    refused = kubectl.run("apply", "-f", "-", stdin=nodeclass.replace("spec:\n", "spec:\n  rolle: x\n", 1), check=False)
    assert 'EC2NodeClass in version "v1" cannot be handled as a EC2NodeClass' in refused.err
    assert 'unknown field "spec.rolle"' in refused.err
    # --validate=false sends no fieldValidation: stored as it is, as a real API server would (pruning aside)
    kubectl("apply", "--validate=false", "-f", "-", stdin=DEPLOYMENT.replace("replicas: 1", "replicaz: 1"))


def test_the_example_nodeclass_applies_as_the_readme_shows(kubectl: emulator_kubectl.Kubectl) -> None:
    out = kubectl("apply", "-f", str(EXAMPLES / "00-ec2nodeclass.yaml"))
    assert out == "ec2nodeclass.karpenter.k8s.aws/default created\n"


def test_openapi_v2_is_served_as_json(kubectl_server: runner.KubeAPIRunner) -> None:
    request = urllib.request.Request(f"{kubectl_server.url}/openapi/v2", headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        document = json.loads(response.read())
    pool = document["definitions"]["sh.karpenter.v1.NodePool"]
    assert pool["x-kubernetes-group-version-kind"] == [{"group": "karpenter.sh", "version": "v1", "kind": "NodePool"}]
    assert document["definitions"]["io.k8s.api.core.v1.Pod"]["properties"]["spec"] == {
        "$ref": "#/definitions/io.k8s.api.core.v1.PodSpec"
    }


def test_commands_that_ask_for_v2_protobuf_fall_back_without_a_warning(
    kubectl: emulator_kubectl.Kubectl, kubectl_server: runner.KubeAPIRunner
) -> None:
    """kubectl asks for OpenAPI v2 as gnostic's protobuf (client-side `apply` of a change, `set`, `patch`,
    `explain`) and takes the 406 as "no v2": it patches built-in kinds with its compiled-in strategic merge metadata
    (apply/patcher.go) and explains from v3. Serving v2 would hand it our schemas instead, which carry no
    `x-kubernetes-patch-merge-key`: containers would be replaced instead of merged by name."""
    kubectl("apply", "-f", "-", stdin=DEPLOYMENT)
    changed = kubectl.run(
        "apply", "-f", "-", stdin=DEPLOYMENT.replace("name: app, image: nginx", "name: app, image: nginx:2")
    )
    patched = kubectl.run("set", "image", "deployment/web", "app=nginx:3")
    assert (changed.err, patched.err) == ("", "")

    async def asked() -> list[str]:
        return [str(r.headers.get("Accept", "")) for r in list(kubectl_server.api) if r.url.path == "/openapi/v2"]

    assert any("proto-openapi.spec.v2" in accept for accept in kubectl_server.call(asked))
    spec = json.loads(kubectl("get", "deployment", "web", "-o", "json"))["spec"]["template"]["spec"]
    assert [(c["name"], c["image"]) for c in spec["containers"]] == [("app", "nginx:3")]
