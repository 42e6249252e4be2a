"""The resourceVersions the NodeClaim reconcilers' own writes returned, so that a reconcile reading the state cache
never acts on a claim older than what it last wrote (read-your-own-writes over an informer cache).

The cache lags a write by its watch event. A reconcile writes a claim several times in one pass (finalizer, initial
conditions, launch, labels), and the watch event of the first queues the claim again: run on the cache as it is then,
it sees the claim without the later writes and writes them again, as a second writer would. controller-runtime's
answer is the same as here: remember the resourceVersion a write returned and treat a cached object older than it
as stale (kube-controller-manager's expectations, pkg/controller/controller_utils.go, do it by counts). A stale
reconcile does nothing and waits: the watch event of the write it is waiting for queues the object again, and a
re-list queues every object.

resourceVersions are compared as the integers etcd's revisions are (Kubernetes' comparable resource versions,
KEP-5504: apimachinery's CompareResourceVersion); one that is not such an integer is never held stale, and the
writes' own optimistic locks (409 Conflict) are what guard then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _version(value: object) -> int | None:
    text = str(value or "")
    return int(text) if text.isdigit() and not (len(text) > 1 and text.startswith("0")) else None


class Written:
    """Per NodeClaim, the newest resourceVersion one of our writes returned, until the cache has caught up with it."""

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}

    def record(self, written: Mapping[str, Any] | None) -> None:
        """Remember the object a write returned (None, or one without a usable resourceVersion: nothing to wait for)."""
        if not written:
            return
        metadata = written.get("metadata") or {}
        version = _version(metadata.get("resourceVersion"))
        if version is None:
            return
        key = str(metadata.get("name") or "")
        if version > self._versions.get(key, -1):
            self._versions[key] = version

    def stale(self, name: str, cached_version: str) -> bool:
        """True when the cache's copy of `name` is older than our last write of it; once it is not, the write is
        forgotten (the cache has it: nothing more to wait for)."""
        ours = self._versions.get(name)
        if ours is None:
            return False
        cached = _version(cached_version)
        if cached is not None and cached < ours:
            return True
        del self._versions[name]
        return False

    def forget(self, name: str) -> None:
        """The claim is gone from the cache: a write still awaited will never show there."""
        self._versions.pop(name, None)

    def __len__(self) -> int:
        return len(self._versions)
