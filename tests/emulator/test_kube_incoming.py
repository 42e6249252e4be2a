"""The API server's own request parsing (`karpy_emulator.apiserver.incoming`) against kmock's: the same requests,
sent to a server that parses them itself and to one that leaves them to kmock (a test declared a reaction), make the
same `kmock.Request` fields, so kmock's request spy, its filters and the server's routing see what they saw before."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from karpy_emulator.apiserver import runner, server

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"}, "spec": {"containers": [{"name": "a"}]}}
BINDING = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1"}, "target": {"kind": "Node", "name": "n"}}
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"
# (method, path with query, body, content type): reads, writes of every kind, the namespaces path kmock misreads,
# a subresource, a watch, a body that is not JSON (server-side apply's YAML), and a path that is no resource.
REQUESTS: list[tuple[str, str, Any, str]] = [
    ("POST", "/api/v1/namespaces/default/pods", POD, "application/json"),
    ("GET", "/api/v1/namespaces/default/pods/p1", None, ""),
    ("GET", "/api/v1/pods?labelSelector=app%3Dweb&limit=2", None, ""),
    ("PATCH", "/api/v1/namespaces/default/pods/p1/status", {"status": {"phase": "Running"}}, MERGE),
    ("PATCH", "/api/v1/namespaces/default/pods/p1?fieldManager=t", "metadata:\n  labels: {a: b}\n", APPLY),
    ("POST", "/api/v1/namespaces/default/pods/p1/binding", BINDING, "application/json"),
    ("GET", "/api/v1/namespaces/shop", None, ""),
    ("GET", "/apis/karpenter.sh/v1/nodeclaims?watch=true&timeoutSeconds=1&resourceVersion=1", None, ""),
    ("DELETE", "/api/v1/namespaces/default/pods/p1", {"propagationPolicy": "Background"}, "application/json"),
    ("GET", "/version", None, ""),
]  # fmt: skip
COMPARED = (
    "method",
    "params",
    "cookies",
    "body",
    "text",
    "data",
    "action",
    "resource",
    "namespace",
    "name",
    "subresource",
)


def _send(base: str, method: str, path: str, body: Any, content_type: str) -> None:
    data = None if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()
    headers = {"Authorization": "Bearer t", **({"Content-Type": content_type} if content_type else {})}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
    except urllib.error.HTTPError as refused:  # the answers do not matter here, only what was parsed
        refused.read()


def _parsed(served: runner.KubeAPIRunner) -> list[dict[str, Any]]:
    for method, path, body, content_type in REQUESTS:
        _send(served.url, method, path, body, content_type)
    return [
        {
            **{field: getattr(request, field) for field in COMPARED},
            "path": request.url.path_qs,
            "headers": {k: v for k, v in request.headers.items() if k != "Host"},
        }
        for request in served.api._requests
    ]


@pytest.fixture
def intercepted() -> Iterator[runner.KubeAPIRunner]:
    """A server on which a test declared a reaction (one never asked for): kmock parses every request."""
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=7)) as served:

        async def declare() -> None:
            served.api["get", "/never-asked"] << 404

        served.call(declare)
        yield served


def test_the_servers_own_parse_makes_kmocks_request(
    kube: runner.KubeAPIRunner, intercepted: runner.KubeAPIRunner
) -> None:
    own, kmocks = _parsed(kube), _parsed(intercepted)
    assert len(own) == len(REQUESTS)
    assert own == kmocks
    assert own[3]["data"] == {"status": {"phase": "Running"}}  # one decode of a JSON body
    assert own[4]["data"] is None  # YAML: no JSON, as kmock leaves it
