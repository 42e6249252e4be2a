"""A write stores a new object that shares what it did not change with the version before it (the module docstring
of `karpy_emulator.apiserver.objects`), and never changes a stored version in place: watchers and the stand-ins'
informer caches hold those versions."""

from __future__ import annotations

import json

import kmock
import kubernetes
from tests import builders

from karpy_emulator.apiserver import runner

NS = "default"
PODS = kmock.resource("v1/pods")


def _stored(kube: runner.KubeAPIRunner, name: str) -> dict[str, object]:
    found = kube.api._db.live((PODS, NS, name))
    assert found is not None
    return found


def test_a_binding_copies_only_spec_and_status(kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api) -> None:
    core.create_namespaced_pod(NS, builders.pod("p", namespace=None, labels={"app": "web"}))
    before = _stored(kube, "p")
    frozen = json.dumps(before, sort_keys=True)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"},
    }
    core.create_namespaced_pod_binding("p", NS, binding, _preload_content=False)  # a Status: read raw
    after = _stored(kube, "p")
    assert after["spec"]["nodeName"] == "n1"  # type: ignore[index]
    assert after["spec"]["containers"] is before["spec"]["containers"]  # type: ignore[index]
    assert after["metadata"]["labels"] is before["metadata"]["labels"]  # type: ignore[index]
    assert json.dumps(before, sort_keys=True) == frozen  # the version before is as it was stored


def test_a_status_patch_shares_the_spec_and_leaves_the_old_version_alone(
    kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api
) -> None:
    core.create_namespaced_pod(NS, builders.pod("p", namespace=None))
    before = _stored(kube, "p")
    frozen = json.dumps(before, sort_keys=True)
    running_status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status("p", NS, {"status": running_status})
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"k": "v"}}})
    core.delete_namespaced_pod("p", NS)
    assert json.dumps(before, sort_keys=True) == frozen
    history = kube.api.objects[PODS, NS, "p"].history
    running, labelled = history[-3].raw, history[-2].raw
    assert running["spec"] is before["spec"]  # a status write shares the spec
    assert labelled["status"] is running["status"]  # a main write shares the status
    assert running["status"]["phase"] == "Running"
    assert before["status"] == {"phase": "Pending"}


def test_every_version_a_watch_was_sent_is_still_what_it_was_sent_as(
    kube: runner.KubeAPIRunner, core: kubernetes.client.CoreV1Api
) -> None:
    # The bytes of a change are encoded once, when it is stored; the dict beside them is what the stand-ins' informer
    # caches keep. A version changed in place through a part it shares with a later one would tell the two apart.
    core.create_namespaced_pod(NS, builders.pod("p", namespace=None, labels={"app": "web"}))
    pod = kube.api._db.live((PODS, NS, "p"))
    assert pod is not None
    replaced = json.loads(json.dumps(pod))
    replaced["spec"]["containers"][0]["image"] = "nginx:2"
    core.replace_namespaced_pod("p", NS, replaced)
    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status("p", NS, {"status": running})
    core.patch_namespaced_pod("p", NS, {"metadata": {"labels": {"k": "v"}, "finalizers": ["example.com/hold"]}})
    core.patch_namespaced_pod("p", NS, [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}])
    target = {"kind": "Node", "name": "n"}
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": target}
    core.create_namespaced_pod_binding("p", NS, binding, _preload_content=False)
    core.patch_namespaced_pod_status("p", NS, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    core.delete_namespaced_pod("p", NS)  # held by its finalizer: marked
    core.patch_namespaced_pod("p", NS, {"metadata": {"finalizers": None}})  # and gone
    changes = kube.api._db.changes_since(PODS, 0)
    assert changes is not None
    assert len(changes) == 9
    for change in changes:
        assert json.loads(change.encoded) == change.obj, change.type
