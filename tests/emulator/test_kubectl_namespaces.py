"""Namespaces and `/version` through the real kubectl: what `kubectl get ns` answered with HTTP 500 before.

Behaviour as upstream: the system namespaces exist from the start (a new cluster's), a namespace is `Active` with the
`kubernetes` finalizer (pkg/registry/core/namespace/strategy.go), nothing is created in a missing namespace or one
being terminated (plugin/pkg/admission/namespace/lifecycle/admission.go), and deleting a namespace deletes what is in
it (pkg/controller/namespace/deletion/namespaced_resources_deleter.go)."""

from __future__ import annotations

import json

from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator.apiserver import runner

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {colour: blue}
"""


def test_version_names_the_emulated_kubernetes(kubectl: emulator_kubectl.Kubectl) -> None:
    version = json.loads(kubectl("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == "v1.31.0-eks-emulated"
    assert (version["serverVersion"]["major"], version["serverVersion"]["minor"]) == ("1", "31")


def test_a_new_cluster_lists_its_system_namespaces(kubectl: emulator_kubectl.Kubectl) -> None:
    rows = emulator_kubectl.table(kubectl("get", "namespaces"))
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert [row[:2] for row in rows[1:]] == [
        ["default", "Active"],
        ["kube-node-lease", "Active"],
        ["kube-public", "Active"],
        ["kube-system", "Active"],
    ]
    assert kubectl("get", "ns", "default", "-o", "jsonpath={.status.phase}") == "Active"


def test_create_namespace_then_objects_in_it(kubectl: emulator_kubectl.Kubectl) -> None:
    # kubectl's typed client posts the Namespace as protobuf (the emulator reads that envelope)
    assert kubectl("create", "namespace", "shop", "--dry-run=server", "-o", "name") == "namespace/shop\n"
    assert kubectl("create", "namespace", "shop") == "namespace/shop created\n"
    spec = json.loads(kubectl("get", "namespace", "shop", "-o", "json"))["spec"]
    assert spec == {"finalizers": ["kubernetes"]}
    assert "created" in kubectl("apply", "-f", "-", stdin=CONFIGMAP)
    assert kubectl("get", "configmap", "settings", "-n", "shop", "-o", "jsonpath={.data.colour}") == "blue"


def test_nothing_is_created_in_a_namespace_that_does_not_exist(kubectl: emulator_kubectl.Kubectl) -> None:
    refused = kubectl.run("apply", "-f", "-", stdin=CONFIGMAP, check=False)
    assert refused.code != 0
    assert 'namespaces "shop" not found' in refused.err


def test_deleting_a_namespace_deletes_what_is_in_it(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("create", "namespace", "shop")
    kubectl("apply", "-f", "-", stdin=CONFIGMAP)
    kubectl("create", "namespace", "other")
    kubectl("apply", "-f", "-", stdin=CONFIGMAP.replace("shop", "other"))
    assert kubectl("delete", "namespace", "shop") == 'namespace "shop" deleted\n'
    assert kubectl.run("get", "namespace", "shop", check=False).code == 1
    assert kubectl("get", "configmaps", "-A", "-o", "jsonpath={.items[*].metadata.namespace}") == "other"


def test_a_terminating_namespace_takes_nothing_new_and_goes_with_its_last_finalizer(
    kubectl: emulator_kubectl.Kubectl, kubectl_server: runner.KubeAPIRunner
) -> None:
    kubectl("create", "namespace", "shop")
    held = CONFIGMAP.replace("metadata: {", "metadata: {finalizers: [example.com/hold], ")
    kubectl("apply", "-f", "-", stdin=held)
    kubectl("delete", "namespace", "shop", "--wait=false")
    assert kubectl("get", "ns", "shop", "-o", "jsonpath={.status.phase}") == "Terminating"
    refused = kubectl.run("create", "configmap", "late", "-n", "shop", "--from-literal=a=b", check=False)
    assert "because it is being terminated" in refused.err
    kubectl("patch", "configmap", "settings", "-n", "shop", "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert kubectl.run("get", "namespace", "shop", check=False).code == 1
