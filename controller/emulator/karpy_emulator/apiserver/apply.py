"""Server-side apply (`PATCH` with `application/apply-patch+yaml`): `kubectl apply --server-side`.

A subset of structured-merge-diff (sigs.k8s.io/structured-merge-diff, as the API server's fieldmanager uses it):

* each manager's fields are recorded in `metadata.managedFields` (`operation: Apply`, `fieldsV1` in the `f:`/`k:`
  encoding) — the leaves of the configuration it applied, items of keyed lists addressed by their key;
* applying creates the object when it does not exist, else merges the configuration into it (strategic merge:
  keyed lists merged by key, other lists replaced, as `listType: atomic`), and removes the fields the manager applied
  before but not any more, unless another manager owns them too;
* a field another manager owns with a different value is a conflict (409, every field named) unless `force=true`,
  which takes the field over. The other manager may be an applier or a writer that updated or patched the field
  (its `operation: Update` entry, kept by `managers`), named as the API server's conflict.go (printManager) does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

import yaml

from karpy_emulator.apiserver import api_status, objects, patches

CONTENT_TYPE: Final = "application/apply-patch+yaml"
Path = tuple[str, ...]
"""One field: `f:<name>` per map key, `k:<json key>` per keyed list item (fieldsV1's own encoding)."""


def configuration(body: bytes) -> dict[str, Any]:
    try:
        applied = yaml.safe_load(body.decode() or "{}")
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise api_status.bad_request(f"error decoding YAML: {error}") from error
    if not isinstance(applied, dict):
        raise api_status.bad_request("the applied configuration must be an object")
    return applied


def fields(value: Any, path: Path = (), *, at: tuple[str, ...] = ()) -> set[Path]:
    """The leaf fields set by an applied configuration (metadata's server-owned fields left out)."""
    found: set[Path] = set()
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            if not path and key in ("apiVersion", "kind"):
                continue
            if path == ("f:metadata",) and key in ("name", "namespace", "resourceVersion", "managedFields"):
                continue
            found |= fields(item, (*path, f"f:{key}"), at=(*at, str(key)))
    elif isinstance(value, list) and value and (key := patches.merge_key(at)) is not None:
        for item in value:
            if isinstance(item, Mapping) and key in item:
                item_path = (*path, "k:" + json.dumps({key: item[key]}, separators=(",", ":")))
                found |= {item_path} | fields(item, item_path, at=at)
    else:
        found.add(path)
    return found


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """fieldsV1 of a set of fields."""
    tree: dict[str, Any] = {}
    for path in sorted(paths):
        node = tree
        for part in path:
            node = node.setdefault(part, {})
        if path and path[-1].startswith("k:"):  # a keyed item is itself owned, besides its fields
            node.setdefault(".", {})
    return tree


def decode(tree: Mapping[str, Any], path: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for part, below in tree.items():
        if part == ".":
            found.add(path)
            continue
        child = (*path, part)
        found |= decode(below, child) if below else {child}
    return found


def value_at(obj: Any, path: Path) -> Any:
    """The value at a field of an object (None when absent)."""
    for part in path:
        if part.startswith("f:") and isinstance(obj, Mapping):
            obj = obj.get(part[2:])
        elif part.startswith("k:") and isinstance(obj, list):
            key, wanted = next(iter(json.loads(part[2:]).items()))
            obj = next((item for item in obj if isinstance(item, Mapping) and item.get(key) == wanted), None)
        else:
            return None
    return obj


def _remove(obj: dict[str, Any], path: Path) -> None:
    parent: Any = value_at(obj, path[:-1])
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        key, wanted = next(iter(json.loads(last[2:]).items()))
        parent[:] = [item for item in parent if not (isinstance(item, Mapping) and item.get(key) == wanted)]


def applied(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    kind: objects.Kind,
    *,
    manager: str,
    force: bool,
    now: str,
) -> dict[str, Any]:
    """The object after `manager` applied `config` to `live` (None: it is created), its managedFields updated."""
    mine = fields(config)
    entries = [dict(entry) for entry in objects.metadata(live or {}).get("managedFields") or ()]
    owned = [(entry, decode(entry.get("fieldsV1") or {})) for entry in entries]
    applied_before = set().union(*(paths for entry, paths in owned if _is_apply_of(entry, manager)))
    others = [(entry, paths) for entry, paths in owned if not _is_apply_of(entry, manager)]
    if live is None:
        result = objects.clone(dict(config))
    else:
        conflicts = sorted(
            (_named(entry), path)
            for entry, paths in others
            for path in mine & paths
            if value_at(live, path) != value_at(config, path)
        )
        if conflicts and not force:
            raise _conflict(kind, str(objects.metadata(live).get("name", "")), conflicts)
        merge = patches.merge_patch if kind.custom else patches.strategic_merge_patch
        result = merge(objects.clone(dict(live)), objects.clone(dict(config)))
        owned_by_others = set().union(*(paths for _, paths in others))
        for path in sorted(applied_before - mine - owned_by_others, key=len, reverse=True):
            _remove(result, path)
            for end in range(len(path) - 1, 0, -1):  # and the maps it leaves empty that nobody owns
                if value_at(result, path[:end]) != {} or path[:end] in mine | owned_by_others:
                    break
                _remove(result, path[:end])
        taken = {path for _, path in conflicts}  # forced: the conflicting fields change hands
        others = [(entry, paths - taken) for entry, paths in others]
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": kind.api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": encode(mine),
    }
    kept = [{**other, "fieldsV1": encode(paths)} for other, paths in others if paths]
    result.setdefault("metadata", {})["managedFields"] = [*kept, entry]
    return result


def _is_apply_of(entry: Mapping[str, Any], manager: str) -> bool:
    return entry.get("manager") == manager and entry.get("operation") == "Apply"


def _named(entry: Mapping[str, Any]) -> str:
    """A manager as a conflict names it (conflict.go, printManager): an updater with its API version and time."""
    named = json.dumps(str(entry.get("manager", "")))
    if entry.get("subresource"):
        named += f" with subresource {json.dumps(str(entry['subresource']))}"
    if entry.get("operation") == "Update":
        named += f" using {entry.get('apiVersion', '')}"
        if entry.get("time"):
            named += f" at {entry['time']}"
    return named


def _conflict(kind: objects.Kind, name: str, conflicts: list[tuple[str, Path]]) -> api_status.ApiError:
    def dotted(path: Path) -> str:
        return "".join(f".{part[2:]}" if part.startswith("f:") else f"[{part[2:]}]" for part in path)

    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {other}", "field": dotted(path)}
        for other, path in conflicts
    ]
    listed = "\n".join(f"- conflict with {other}: {dotted(path)}" for other, path in conflicts)
    return api_status.ApiError(
        409,
        "Conflict",
        f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: {listed}",
        details={"name": name, "group": kind.group, "kind": kind.plural, "causes": causes},
    )
