"""Field managers of the writers that do not apply: creates, updates and patches as `operation: Update` entries.

As the API server's fieldmanager does (staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/
fieldmanager.go and structured-merge-diff's merge/update.go, `Updater.Update`): a write by manager M compares the
object before and after it; M's Update entry (one per manager, API version and subresource) gains every field the
write added or changed and every manager loses the fields it removed; the fields M changed are taken from the other
managers (an update takes ownership without conflict, it is the next apply that conflicts). The manager is the
request's `fieldManager`, else the client's User-Agent up to its first `/` (fieldmanager.go, prefixFromUserAgent).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy_emulator.apiserver import apply, objects

UPDATE: Final = "Update"
_UNKNOWN_MANAGER: Final = "unknown"


def manager_of(params: Mapping[str, str], headers: Mapping[str, str]) -> str:
    """The write's manager: `?fieldManager=`, else the User-Agent's product (`kubectl`, `Go-http-client`, ...)."""
    named = params.get("fieldManager")
    if named:
        return named
    agent = headers.get("User-Agent", "").split("/", 1)[0].strip()
    return agent[:128] or _UNKNOWN_MANAGER


def updated(
    old: Mapping[str, Any] | None,
    new: dict[str, Any],
    *,
    manager: str,
    api_version: str,
    subresource: str | None,
    now: str,
) -> dict[str, Any]:
    """`new` with its managedFields after `manager` wrote it over `old` (None: created). Mutates and returns `new`."""
    before = apply.fields(_content(old)) if old is not None else set()
    after = apply.fields(_content(new))
    changed = {path for path in after if path not in before or apply.value_at(old, path) != apply.value_at(new, path)}
    removed = before - after
    entries = [dict(entry) for entry in (objects.metadata(old or {}).get("managedFields") or ())]
    mine: set[apply.Path] = set()
    kept: list[dict[str, Any]] = []
    for entry in entries:
        owned = apply.decode(entry.get("fieldsV1") or {}) - removed
        if _is_mine(entry, manager, api_version, subresource):
            mine |= owned
            continue
        owned -= changed
        if owned:
            kept.append({**entry, "fieldsV1": apply.encode(owned)})
    mine |= changed
    if mine:
        entry = {"manager": manager, "operation": UPDATE, "apiVersion": api_version, "time": now}
        if subresource:
            entry["subresource"] = subresource
        kept.append({**entry, "fieldsType": "FieldsV1", "fieldsV1": apply.encode(mine)})
    meta = new.setdefault("metadata", {})
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)
    return new


def _is_mine(entry: Mapping[str, Any], manager: str, api_version: str, subresource: str | None) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == UPDATE
        and entry.get("apiVersion") == api_version
        and (entry.get("subresource") or None) == subresource
    )


def _content(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """What fields are tracked in: the object without the metadata the server sets."""
    if obj is None:
        return {}
    meta = {key: value for key, value in objects.metadata(obj).items() if key not in _SERVER_METADATA}
    return {**obj, "metadata": meta} if meta else {key: value for key, value in obj.items() if key != "metadata"}


_SERVER_METADATA: Final = frozenset(
    {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "selfLink"}
)
