"""`kubectl apply` (client-side and `--server-side`), `create`, `replace` and the three `patch` types through the real
kubectl. Server-side apply follows sigs.k8s.io/structured-merge-diff's rules as `apiserver.apply` documents them:
cases after the API server's fieldmanager tests (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager,
TestApplyStripsFields... / conflicts on a field another applier owns / force takes it over / a field dropped from
the configuration is removed), and after its update-then-apply cases (TestApplyUpdateApplyConflictForced,
TestUpdateApplyConflict in test/integration/apiserver/apply/apply_test.go): a field a `kubectl patch`, `scale` or
`edit` changed belongs to that writer, so the next apply of another value conflicts naming it."""

from __future__ import annotations

import json

from tests.emulator import kubectl as emulator_kubectl

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {team: shop}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: nginx}]}
"""


def _stored_web(kubectl: emulator_kubectl.Kubectl) -> dict[str, object]:
    got: dict[str, object] = json.loads(kubectl("get", "deployment", "web", "-o", "json"))
    return got


def test_server_side_apply_creates_then_records_its_manager(kubectl: emulator_kubectl.Kubectl) -> None:
    assert kubectl("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT) == "deployment.apps/web serverside-applied\n"
    managed = json.loads(kubectl("get", "deployment", "web", "-o", "jsonpath={.metadata.managedFields}"))
    assert [(m["manager"], m["operation"]) for m in managed] == [("kubectl", "Apply")]
    assert managed[0]["fieldsV1"]["f:spec"]["f:replicas"] == {}
    containers = managed[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers['k:{"name":"app"}'] == {".": {}, "f:image": {}, "f:name": {}}


def test_another_applier_conflicts_unless_it_forces(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT)
    scaled = DEPLOYMENT.replace("replicas: 2", "replicas: 5")
    refused = kubectl.run("apply", "--server-side", "--field-manager=autoscaler", "-f", "-", stdin=scaled, check=False)
    assert refused.code == 1
    assert 'conflict with "kubectl": .spec.replicas' in refused.err
    # the same value is no conflict: both own the field
    kubectl("apply", "--server-side", "--field-manager=mirror", "-f", "-", stdin=DEPLOYMENT)
    kubectl("apply", "--server-side", "--field-manager=autoscaler", "--force-conflicts", "-f", "-", stdin=scaled)
    assert kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}") == "5"


def test_a_field_dropped_from_the_configuration_is_removed(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT)
    kubectl("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT.replace(", labels: {team: shop}", ""))
    assert "labels" not in _stored_web(kubectl)["metadata"]  # type: ignore[operator]


def test_client_side_apply_create_replace_and_patches(kubectl: emulator_kubectl.Kubectl) -> None:
    assert kubectl("create", "-f", "-", stdin=DEPLOYMENT) == "deployment.apps/web created\n"
    assert kubectl("apply", "-f", "-", stdin=DEPLOYMENT.replace("nginx", "nginx:1.27")).endswith("configured\n")
    assert kubectl("replace", "-f", "-", stdin=DEPLOYMENT.replace("replicas: 2", "replicas: 4")).endswith("replaced\n")
    kubectl("patch", "deployment", "web", "--type=merge", "-p", '{"metadata":{"labels":{"tier":"front"}}}')
    kubectl("patch", "deployment", "web", "--type=json", "-p", '[{"op":"replace","path":"/spec/replicas","value":6}]')
    # strategic merge: containers merge by name, so the sidecar joins instead of replacing the app
    kubectl(
        "patch",
        "deployment",
        "web",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"log","image":"fluent"}]}}}}',
    )
    got = _stored_web(kubectl)
    assert got["metadata"]["labels"] == {"team": "shop", "tier": "front"}  # type: ignore[index]
    assert got["spec"]["replicas"] == 6  # type: ignore[index]
    names = [c["name"] for c in got["spec"]["template"]["spec"]["containers"]]  # type: ignore[index]
    assert names == ["app", "log"]
    assert kubectl("delete", "deployment", "web") == 'deployment.apps "web" deleted from default namespace\n'


def test_a_patched_field_belongs_to_the_patcher_until_an_apply_forces_it(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT)
    kubectl("patch", "deployment", "web", "--type=merge", "-p", '{"spec":{"replicas":3}}')
    managed = json.loads(kubectl("get", "deployment", "web", "-o", "jsonpath={.metadata.managedFields}"))
    owners = {(m["manager"], m["operation"]): m["fieldsV1"] for m in managed}
    assert owners[("kubectl-patch", "Update")] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in owners[("kubectl", "Apply")]["f:spec"]  # the update took it over

    refused = kubectl.run("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT, check=False)
    assert refused.code == 1
    assert 'conflict with "kubectl-patch" using apps/v1 at 2023-11-14T22:13:20Z: .spec.replicas' in refused.err
    assert "--force-conflicts" in refused.err  # kubectl's own hint: the error is the Conflict it recognises
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=DEPLOYMENT)
    assert kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}") == "2"
    managed = json.loads(kubectl("get", "deployment", "web", "-o", "jsonpath={.metadata.managedFields}"))
    assert [(m["manager"], m["operation"]) for m in managed] == [("kubectl", "Apply")]  # the patcher owns nothing


def test_create_and_label_record_their_managers(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("create", "-f", "-", stdin=DEPLOYMENT)
    kubectl("label", "deployment", "web", "tier=front")
    managed = json.loads(kubectl("get", "deployment", "web", "-o", "jsonpath={.metadata.managedFields}"))
    owners = {m["manager"]: m for m in managed}
    assert set(owners) == {"kubectl-create", "kubectl-label"}
    assert owners["kubectl-label"]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:tier": {}}}}
    assert owners["kubectl-create"]["fieldsV1"]["f:spec"]["f:replicas"] == {}
    assert owners["kubectl-create"]["operation"] == "Update"
    # an applier setting the label another value conflicts with the labeller; the same value shares it
    labelled = DEPLOYMENT.replace("labels: {team: shop}", "labels: {team: shop, tier: back}")
    refused = kubectl.run("apply", "--server-side", "-f", "-", stdin=labelled, check=False)
    assert 'conflict with "kubectl-label" using apps/v1' in refused.err
    assert 'conflict with "kubectl-create"' not in refused.err  # replicas: 2 is what the creator set
