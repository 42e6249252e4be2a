"""A base for `KubeClient` wrappers that change only writes (dry run, fault/kill hooks): reads and watches go to the
wrapped client untouched, written once here so every wrapper reads exactly as the real client does."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from karpy.kube import client, resources


class ReadThrough:
    def __init__(self, inner: client.KubeClient) -> None:
        self.inner = inner

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
