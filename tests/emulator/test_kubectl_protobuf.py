"""Built-in kinds kubectl's typed clients post as protobuf (`application/vnd.kubernetes.protobuf`), through the
real kubectl: each is stored as the very object kubectl would have sent as JSON (`--dry-run=client -o json` prints
it), so every field the protobuf decoder reads lands under its JSON name, with its JSON form (IntOrString,
Quantity, bytes as base64), and the zero values JSON omits stay omitted while those it keeps (a `replicas: 0`
pointer) stay.

The commands are those of kubectl's own create/run/expose tests (staging/src/k8s.io/kubectl/pkg/cmd/create/*_test.go,
run/run_test.go, expose/expose_test.go), run against the emulated API server instead of a fake client. `run` and
`expose` post JSON (they build unstructured objects); they are here because they create built-in kinds the same
commands do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.emulator import kubectl as emulator_kubectl

from karpy_emulator.apiserver import api_status, protobuf, runner

# (command, its flags, resource, name): the command creates `name`.
COMMANDS = [
    (("create", "deployment", "web"), ("--image=nginx", "--replicas=0", "--port=80"), "deployment", "web"),
    (("create", "service", "clusterip", "db"), ("--tcp=5432:5432", "--tcp=8080:http"), "service", "db"),
    (("create", "job", "once"), ("--image=busybox",), "job", "once"),
    (("create", "cronjob", "nightly"), ("--image=busybox", "--schedule=0 3 * * *"), "cronjob", "nightly"),
    (("create", "secret", "generic", "creds"), ("--from-literal=user=admin", "--type=Opaque"), "secret", "creds"),
    (("create", "serviceaccount", "robot"), (), "serviceaccount", "robot"),
    (("create", "quota", "small"), ("--hard=cpu=1500m,memory=2Gi,pods=10",), "resourcequota", "small"),
    (("create", "poddisruptionbudget", "keep"), ("--selector=app=web", "--min-available=50%"), "pdb", "keep"),
    # `run` and `expose` build their object as unstructured and post JSON: stored just the same
    (("run", "shell"), ("--image=busybox", "--labels=app=shell", "--port=8080", "--env=MODE=debug"), "pod", "shell"),
]


def _sent_as_json(kubectl: emulator_kubectl.Kubectl, command: tuple[str, ...], flags: tuple[str, ...]) -> Any:
    return json.loads(kubectl(*command, *flags, "--dry-run=client", "-o", "json"))


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What the client wrote: every field but the server's (metadata beyond name/labels, status)."""
    kept = {key: value for key, value in obj.items() if key not in ("metadata", "status")}
    meta = obj.get("metadata") or {}
    kept["metadata"] = {key: meta[key] for key in ("name", "labels", "annotations") if key in meta}
    return kept


def _protobuf_posts(kube: runner.KubeAPIRunner) -> list[str]:
    async def posted() -> list[str]:
        return [
            str(request.url.path)
            for request in list(kube.api)
            if request.method == "POST" and request.headers.get("Content-Type", "").startswith(protobuf.CONTENT_TYPE)
        ]

    return kube.call(posted)


@pytest.mark.parametrize(("command", "flags", "resource", "name"), COMMANDS, ids=[row[2] for row in COMMANDS])
def test_a_typed_create_stores_what_kubectl_sent(
    kubectl: emulator_kubectl.Kubectl,
    kubectl_server: runner.KubeAPIRunner,
    command: tuple[str, ...],
    flags: tuple[str, ...],
    resource: str,
    name: str,
) -> None:
    expected = _sent_as_json(kubectl, command, flags)
    kubectl(*command, *flags)
    stored = json.loads(kubectl("get", resource, name, "-o", "json"))
    assert _content(stored) == _content(expected)
    # sent as protobuf indeed (client-go never falls back to JSON for a typed client)
    assert len(_protobuf_posts(kubectl_server)) == (0 if command[0] == "run" else 1)


def test_expose_creates_the_service_a_deployment_needs(
    kubectl: emulator_kubectl.Kubectl, kubectl_server: runner.KubeAPIRunner
) -> None:
    kubectl("create", "deployment", "web", "--image=nginx", "--port=8000")
    expose = ("expose", "deployment", "web", "--port=80", "--target-port=8000", "--name=web-http")
    expected = json.loads(kubectl(*expose, "--dry-run=client", "-o", "json"))
    assert kubectl(*expose) == "service/web-http exposed\n"
    stored = json.loads(kubectl("get", "service", "web-http", "-o", "json"))
    assert _content(stored) == _content(expected)
    assert stored["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8000}]
    assert stored["spec"]["selector"] == {"app": "web"}
    assert _protobuf_posts(kubectl_server) == ["/apis/apps/v1/namespaces/default/deployments"]


def test_a_container_command_and_a_job_are_read_whole(kubectl: emulator_kubectl.Kubectl) -> None:
    kubectl("create", "job", "once", "--image=busybox", "--", "sh", "-c", "echo hi")
    spec = json.loads(kubectl("get", "job", "once", "-o", "json"))["spec"]["template"]["spec"]
    container = {"command": ["sh", "-c", "echo hi"], "image": "busybox", "name": "once", "resources": {}}
    assert spec["containers"] == [container]
    assert spec["restartPolicy"] == "Never"


def test_a_kind_without_a_message_is_refused_naming_it() -> None:
    envelope = _unknown(b"\x0a\x14\x0a\x0dexample.io/v1\x12\x03Foo")
    with pytest.raises(api_status.ApiError) as refused:
        protobuf.decode(envelope)
    assert refused.value.code == 415
    assert "example.io/v1 Foo" in refused.value.message


def test_a_truncated_body_is_a_bad_request() -> None:
    with pytest.raises(api_status.ApiError) as refused:
        protobuf.decode(b"k8s\x00\x0a\x20\x0a")
    assert refused.value.code == 400
    with pytest.raises(api_status.ApiError) as refused:
        protobuf.decode(b'{"kind": "Pod"}')
    assert refused.value.code == 400


def test_a_kind_is_read_as_its_group_versions_message() -> None:
    """DeleteOptions and the other meta/v1 kinds come with the resource's group version (client-go's scheme)."""
    assert protobuf.message_name("v1", "Pod") == "k8s.io.api.core.v1.Pod"
    assert protobuf.message_name("rbac.authorization.k8s.io/v1", "Role") == "k8s.io.api.rbac.v1.Role"
    assert protobuf.message_name("apps/v1", "DeleteOptions") == "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"
    assert protobuf.message_name("example.io/v1", "Foo") is None


def test_times_and_negative_numbers_take_their_json_form() -> None:
    """ObjectMeta.creationTimestamp (field 8) is a Time{seconds}: RFC 3339 in JSON; deletionGracePeriodSeconds
    (field 10, int64) may be negative (ten-byte varint)."""
    time = _field(1, _varint(1_700_000_000))
    meta = _bytes(1, b"a") + _bytes(8, time) + _field(10, _varint((-1) & (2**64 - 1)))
    type_meta = _bytes(1, _bytes(1, b"v1") + _bytes(2, b"ConfigMap"))
    decoded = protobuf.decode(b"k8s\x00" + type_meta + _bytes(2, _bytes(1, meta)))
    assert decoded == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "creationTimestamp": "2023-11-14T22:13:20Z", "deletionGracePeriodSeconds": -1},
    }


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, varint: bytes) -> bytes:
    return _varint(number << 3) + varint


def _bytes(number: int, data: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _unknown(type_meta: bytes) -> bytes:
    """A `runtime.Unknown` envelope around a typeMeta field (field 1) and an empty raw (field 2)."""
    return b"k8s\x00" + type_meta + b"\x12\x00"
