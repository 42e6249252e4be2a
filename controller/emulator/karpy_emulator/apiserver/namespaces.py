"""Namespaces as the API server and kube-controller-manager's namespace controller serve them.

* Routing: kmock 0.8 reads every `/api/v1/namespaces/...` path as "something inside a namespace", so the
  namespaces resource itself (`/api/v1/namespaces`, `/api/v1/namespaces/shop`, `.../shop/status`,
  `.../shop/finalize`) is rewritten before kmock parses it (`routable`) and put back after (`restored`).
* Lifecycle (plugin/pkg/admission/namespace/lifecycle/admission.go): a namespace starts `Active` with the
  `kubernetes` finalizer in `spec.finalizers`; nothing new is created in a `Terminating` one (403), and, with
  `strict`, nothing in one that does not exist (404).
* Deletion (pkg/controller/namespace/deletion/namespaced_resources_deleter.go): a deleted namespace turns
  `Terminating`, every object in it is deleted (its finalizers honoured), and the namespace goes once it is empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

import aiohttp.web
import attrs
import kmock

from karpy_emulator.apiserver import api_status, objects, store

NAMESPACES: Final = kmock.resource("v1/namespaces")
KIND: Final = objects.Kind("namespaces", "", "v1", "Namespace", namespaced=False, status_subresource=True, custom=False)
SYSTEM: Final = ("default", "kube-node-lease", "kube-public", "kube-system")
"""The namespaces every cluster starts with."""
FINALIZER: Final = "kubernetes"
ACTIVE: Final = "Active"
TERMINATING: Final = "Terminating"

_OWN_PATH: Final = re.compile(r"^/api/v1/namespaces(/[^/]+)?(/(?:status|finalize))?/?$")
_MARK: Final = "/api/v1/namespaces//namespaces"
"""What kmock parses as resource `namespaces` in namespace "" (then `restored` to cluster scope)."""


def routable(raw: aiohttp.web.BaseRequest) -> aiohttp.web.BaseRequest:
    """`raw` with a path kmock parses into the namespaces resource, when it addresses namespaces themselves."""
    if _OWN_PATH.match(raw.path) is None:
        return raw
    rest = raw.path[len("/api/v1/namespaces") :].rstrip("/")
    # with_path drops the query (watch=true, labelSelector...): put it back
    return raw.clone(rel_url=raw.rel_url.with_path(_MARK + rest).with_query(raw.rel_url.query))


def restored(request: kmock.Request) -> kmock.Request:
    """The parsed request of a `routable` path, made cluster-scoped again with its original URL."""
    if request.namespace != "" or not request.url.path.startswith(_MARK):
        return request
    path = "/api/v1/namespaces" + request.url.path[len(_MARK) :]
    url = request.url.with_path(path).with_query(request.url.query)
    return attrs.evolve(request, namespace=None, url=url)


def key(name: str) -> store.Key:
    return (NAMESPACES, None, name)


def defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    """A new namespace as the API server stores it: `Active`, held by the `kubernetes` finalizer."""
    obj.setdefault("spec", {}).setdefault("finalizers", [FINALIZER])
    obj["status"] = {"phase": ACTIVE}
    return obj


def manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def is_terminating(namespace: dict[str, Any] | None) -> bool:
    return namespace is not None and bool(objects.metadata(namespace).get("deletionTimestamp"))


def admit(db: store.Store, namespace: str | None, *, strict: bool) -> None:
    """NamespaceLifecycle admission of a create in `namespace`."""
    if not namespace:
        return
    live = db.live(key(namespace))
    if is_terminating(live):
        raise api_status.ApiError(
            403,
            "Forbidden",
            f"unable to create new content in namespace {namespace} because it is being terminated",
            details={"name": namespace, "kind": "namespaces", "causes": [{"reason": "NamespaceTerminating"}]},
        )
    if live is None and strict:
        raise api_status.not_found("namespaces", "", namespace)


async def delete(
    db: store.Store, old: dict[str, Any], *, namespaced: Iterable[kmock.resource], now: float
) -> tuple[dict[str, Any], bool]:
    """Delete a namespace: mark it `Terminating`, delete everything in it, and remove it when nothing is left;
    returns (the namespace, whether it is gone). Called under the store's lock."""
    name = str(objects.metadata(old).get("name"))
    if not is_terminating(old):
        marked = objects.clone(old)
        marked["metadata"].update(deletionTimestamp=objects.timestamp(now), deletionGracePeriodSeconds=0)
        marked["metadata"]["resourceVersion"] = str(db.resource_version + 1)
        marked["status"] = {**(marked.get("status") or {}), "phase": TERMINATING}
        old = await db.update(key(name), old, marked, held=True)
    for resource in namespaced:
        for item_key, item in list(db.live_items(resource, name)):
            await db.delete(item_key, item)
    return await settle(db, name, namespaced=namespaced)


async def settle(db: store.Store, name: str, *, namespaced: Iterable[kmock.resource]) -> tuple[dict[str, Any], bool]:
    """Remove the terminating namespace `name` once no object is left in it (the namespace controller's last
    step: its `kubernetes` finalizer is dropped and the namespace goes). Called under the store's lock."""
    live = db.live(key(name))
    if live is None or not is_terminating(live):
        return live or {}, live is None
    if any(next(iter(db.live_items(resource, name)), None) is not None for resource in namespaced):
        return live, False
    final, _ = await db.delete(key(name), live)
    return final, True
