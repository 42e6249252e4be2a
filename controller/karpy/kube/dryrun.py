"""`DryRunClient`: reads go to the real API; every write is logged ("would patch nodes/x: {...}") and not sent.

Writes answer as the API server would have, as far as that is knowable without writing: a create returns the body,
a patch returns the current object with the patch applied locally, delete/evict report whether the object exists.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from typing import Any

from karpy.kube import client, patches, resources, wrapping

log = logging.getLogger(__name__)


def _where(res: resources.Resource, name: str, namespace: str) -> str:
    return f"{res}/{namespace}/{name}" if namespace else f"{res}/{name}"


class DryRunClient(wrapping.ReadThrough):
    """Wraps a `KubeClient`: reads pass through, writes are logged and answered locally."""

    def __init__(self, inner: client.KubeClient, *, logger: logging.Logger = log) -> None:
        super().__init__(inner)
        self._log = logger

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        name = meta.get("name") or f"{meta.get('generateName', '')}<generated>"
        self._log.info("dry run: would create %s: %s", _where(res, name, meta.get("namespace", "")), _dump(body))
        return copy.deepcopy(dict(body))

    async def patch(
        self, res: resources.Resource, name: str, patch: client.Patch, *, namespace: str = "", subresource: str = ""
    ) -> dict[str, Any]:
        where = _where(res, name, namespace) + (f"/{subresource}" if subresource else "")
        self._log.info("dry run: would patch %s: %s", where, _dump(patch))
        current = await self.inner.get(res, name, namespace=namespace)
        if current is None:
            raise client.NotFound(404, "NotFound", f'{res} "{name}" not found')
        try:
            result = (
                patches.merge_patch(current, patch)
                if isinstance(patch, Mapping)
                else patches.json_patch(current, patch)
            )
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
