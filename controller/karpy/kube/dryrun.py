"""`DryRunClient`: reads go to the real API; every write is logged ("would patch nodes/x: {...}") and not sent.

Writes answer as the API server would have, as far as that is knowable without writing: a create returns the body,
a patch returns the current object with the patch applied locally, delete/evict report whether the object exists.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from karpy.kube import client, resources

log = logging.getLogger(__name__)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: mappings merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer {path!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _container(doc: Any, parts: list[str]) -> Any:
    for part in parts:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def json_patch(target: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """RFC 6902 add/remove/replace/test/copy/move on a copy of `target`; raises ValueError on a failed op."""
    doc = copy.deepcopy(target)
    for i, op in enumerate(ops):
        try:
            doc = _apply(doc, op)
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise ValueError(f"patch[{i}] ({op.get('op')} {op.get('path')}): {error}") from error
    return doc


def _apply(doc: Any, op: Mapping[str, Any]) -> Any:
    kind, parts = op["op"], _pointer(str(op["path"]))
    if kind == "test":
        if _container(doc, parts) != op.get("value"):
            raise ValueError("test failed")
        return doc
    if kind in ("copy", "move"):
        source = _pointer(str(op["from"]))
        value = copy.deepcopy(_container(doc, source))
        if kind == "move":
            doc = _apply(doc, {"op": "remove", "path": op["from"]})
        return _apply(doc, {"op": "add", "path": op["path"], "value": value})
    if not parts:
        return None if kind == "remove" else copy.deepcopy(op.get("value"))
    parent, last = _container(doc, parts[:-1]), parts[-1]
    if kind == "remove":
        del parent[int(last) if isinstance(parent, list) else last]
    elif kind == "replace":
        if isinstance(parent, list):
            parent[int(last)] = copy.deepcopy(op["value"])
        else:
            _ = parent[last]  # must exist
            parent[last] = copy.deepcopy(op["value"])
    elif kind == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op["value"]))
        else:
            parent[last] = copy.deepcopy(op["value"])
    else:
        raise ValueError(f"unknown op {kind!r}")
    return doc


def _where(res: resources.Resource, name: str, namespace: str) -> str:
    return f"{res}/{namespace}/{name}" if namespace else f"{res}/{name}"


class DryRunClient:
    """Wraps a `KubeClient`: reads pass through, writes are logged and answered locally."""

    def __init__(self, inner: client.KubeClient, *, logger: logging.Logger = log) -> None:
        self.inner = inner
        self._log = logger

    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        return await self.inner.get(res, name, namespace=namespace)

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        return await self.inner.list(
            res, namespace=namespace, label_selector=label_selector, field_selector=field_selector
        )

    def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[client.WatchEvent]:
        return self.inner.watch(
            res, resource_version=resource_version, namespace=namespace, timeout_seconds=timeout_seconds
        )

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        name = meta.get("name") or f"{meta.get('generateName', '')}<generated>"
        self._log.info("dry run: would create %s: %s", _where(res, name, meta.get("namespace", "")), _dump(body))
        return copy.deepcopy(dict(body))

    async def patch(
        self,
        res: resources.Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        where = _where(res, name, namespace) + (f"/{subresource}" if subresource else "")
        self._log.info("dry run: would patch %s: %s", where, _dump(patch))
        current = await self.inner.get(res, name, namespace=namespace)
        if current is None:
            raise client.NotFound(404, "NotFound", f'{res} "{name}" not found')
        try:
            result = merge_patch(current, patch) if isinstance(patch, Mapping) else json_patch(current, patch)
        except ValueError as error:
            raise client.Invalid(422, "Invalid", f"the patch for {where} does not apply: {error}") from error
        return result if isinstance(result, dict) else current

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        grace = "" if grace_period_seconds is None else f" (grace period {grace_period_seconds} s)"
        self._log.info("dry run: would delete %s%s", _where(res, name, namespace), grace)
        return await self.inner.get(res, name, namespace=namespace) is not None

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        self._log.info("dry run: would evict pod %s/%s", namespace, name)
        exists = await self.inner.get(resources.PODS, name, namespace=namespace) is not None
        return client.EvictionOutcome.EVICTED if exists else client.EvictionOutcome.NOT_FOUND

    async def bind(self, namespace: str, name: str, node: str) -> None:
        self._log.info("dry run: would bind pod %s/%s to node %s", namespace, name, node)


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
