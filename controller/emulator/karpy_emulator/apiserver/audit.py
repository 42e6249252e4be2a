"""What each client asked the emulated API server for: (user, verb, group, resource, namespace, name).

The RBAC attributes a real API server authorizes (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go):
the verb from the method (GET on a name = get, on a collection = list or watch, POST = create, PUT = update,
PATCH = patch, DELETE = delete or deletecollection), the resource with its subresource (`pods/eviction`). The user
is the bearer token as sent (the emulator authenticates nobody); the stand-ins send none. Tests compare what the
controller used with what the chart's RBAC grants.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import kmock

ANONYMOUS = ""


@dataclass(frozen=True, slots=True, order=True)
class Access:
    user: str
    verb: str
    group: str
    resource: str
    """Plural, with `/<subresource>` when there is one."""
    namespace: str
    """"" for cluster-scoped resources and for requests across all namespaces."""
    name: str
    """"" for collections."""


def verb(method: str, *, named: bool, watch: bool) -> str:
    if watch:
        return "watch"
    match method:
        case "GET":
            return "get" if named else "list"
        case "POST":
            return "create"
        case "PUT":
            return "update"
        case "PATCH":
            return "patch"
        case "DELETE":
            return "delete" if named else "deletecollection"
    return method.lower()


def access(request: kmock.Request) -> Access:
    """What `request` asked for. A request outside the resource paths (discovery: `/api`, `/apis/<group>/<version>`)
    is a `get` whose resource is its URL path."""
    resource = request.resource
    named = request.name is not None
    if resource is None or resource.plural is None:
        return Access(
            user(request.headers), verb(request.method, named=True, watch=False), "", request.url.path, "", ""
        )
    plural = str(resource.plural)
    return Access(
        user=user(request.headers),
        verb=verb(request.method, named=named, watch=request.action == kmock.action.WATCH),
        group=resource.group or "",
        resource=f"{plural}/{request.subresource}" if request.subresource else plural,
        namespace=request.namespace or "",
        name=request.name or "",
    )


def user(headers: Mapping[str, str]) -> str:
    value = headers.get("Authorization", "")
    return value.removeprefix("Bearer ").strip() if value.startswith("Bearer ") else ANONYMOUS


class Log:
    """Every distinct access (a set: bounded by what the clients do, not by how often), safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[Access] = set()

    def record(self, access: Access) -> None:
        with self._lock:
            self._seen.add(access)

    def snapshot(self) -> frozenset[Access]:
        with self._lock:
            return frozenset(self._seen)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()
